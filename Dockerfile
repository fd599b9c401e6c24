# The GPU Interop Book with the exact stack its lock names: a CUDA 13 runtime base image, CPython 3.12, and the gpu
# and test extras at the versions of locks/gpu-cp312-linux-x86_64.txt (`make lock` writes it).
#
#   docker build -t gpu-interop-book .
#   docker run --rm --gpus all -p 8888:8888 gpu-interop-book          # JupyterLab on the chapters, port 8888
#   docker run --rm --gpus all gpu-interop-book make doctor PYTHON=python   # can this machine run the book?
#
# The host needs an NVIDIA driver for CUDA 13 (release 580 or newer) and the NVIDIA Container Toolkit (--gpus).
# The CUDA libraries the frameworks use come with their wheels; the base image brings the runtime's system setup.
# Built by .github/workflows/container.yml (images cannot be built on the offline machines the book is written on).
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONHASHSEED=0 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false \
    PATH=/opt/venv/bin:$PATH

# Ubuntu 24.04's Python is CPython 3.12, the one the lock is resolved for.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.12 python3.12-venv make git \
 && rm -rf /var/lib/apt/lists/*

# The locked stack first (a layer that changes only with the lock), then the book itself without its dependencies.
COPY locks/gpu-cp312-linux-x86_64.txt /tmp/lock.txt
RUN python3.12 -m venv /opt/venv \
 && /opt/venv/bin/python -m pip install --upgrade pip \
 && /opt/venv/bin/python -m pip install --requirement /tmp/lock.txt

WORKDIR /book
COPY . /book
RUN python -m pip install --no-deps -e . \
 && python -m pip check \
 && python -c "import support, booktools.doctor, booktools.workshop; print('the book imports')"

EXPOSE 8888
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--allow-root", "--ServerApp.root_dir=/book/chapters"]
