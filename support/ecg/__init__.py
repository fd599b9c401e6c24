"""The ECG pipeline of chapter 6: from a CSV file to anomaly scores without leaving the GPU."""
