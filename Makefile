# GPU Interop Book: the two commands of the README are `make book` and `make test`.
#
# By default both work in the project's own virtual environment, .venv, created here with what pyproject.toml
# lists. Pass PYTHON=... to use an environment you already have instead (the conda environment of
# environment.yml, or the lab GPU host's python3): nothing is installed then.
#
#   make book        build the HTML book into _build/html from the committed notebook outputs (no GPU needed)
#   make test        unit tests, notebook checks, the book check, and nbval on every notebook this machine can run
#   make test-gpu    the same in your GPU environment (PYTHON, default python3); fails instead of skipping GPU notebooks
#   make execute     on a GPU host: execute notebooks in place, record time, memory and claims (NOTEBOOKS=..., LABEL=...)
#   make compare     on your GPU: run the chapters' claims (COMPARE=chapters/...) and print them beside the book's
#   make lint        ruff over support/, tests/ and the notebooks (notebook code within 88 columns)
#   make workshop    the participant edition in _build/workshop/: chapters without solutions or outputs, a README
#   make diagrams    redraw the explanatory diagrams into chapters/diagrams/ (support/diagrams.py)
#   make doctor      on a GPU server: can this machine run the book? one line per check, exit 1 on a blocker
#   make gpu-env     on a GPU server: create .venv-gpu with the pip `gpu` extra (Linux x86_64, CUDA 13 driver)
#   make resolve-gpu from any machine: pip's resolver for the `gpu` extra (CPython 3.12, manylinux), installs nothing
#   make test-gpu-16gb  make test-gpu on a GPU shrunk to 16 GB per process with CUDA MPS (a GPU of your own)

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV := .venv
PYTHON ?=
ifeq ($(strip $(PYTHON)),)
  PY := $(VENV)/bin/python
  BOOK_DEPS := $(VENV)/.installed-book
  TEST_DEPS := $(VENV)/.installed-test
else
  PY := $(PYTHON)
  BOOK_DEPS :=
  TEST_DEPS :=
endif
# Notebook kernels start in chapters/ and import `support` from the working copy.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
# Kernels started by `make execute` and by nbval hash strings the same way in every run.
export PYTHONHASHSEED := 0
NOTEBOOKS ?= $(sort $(wildcard chapters/*.ipynb))
PYTEST_ARGS ?=
PIP := $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check

.PHONY: help book test test-gpu test-gpu-16gb execute compare lint clean doctor gpu-env resolve-gpu diagrams workshop

help:
	@sed -n 's/^#   //p' Makefile

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip

$(VENV)/.installed-book: pyproject.toml | $(VENV)/bin/python
	$(PIP) -e '.[book]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PIP) -e '.[test,cpu]'
	touch $@

book: $(BOOK_DEPS)
	$(PY) -c 'from jupyter_book.cli.main import main; main()' build . --builder html --warningiserror --nitpick --keep-going

test: $(TEST_DEPS)
	$(PY) -m pytest $(PYTEST_ARGS)

test-gpu:
	$(MAKE) test PYTHON=$(or $(strip $(PYTHON)),python3) PYTEST_ARGS="--require-gpu $(PYTEST_ARGS)"

test-gpu-16gb:
	$(or $(strip $(PYTHON)),python3) -m booktools.mps --limit 16G -- $(MAKE) test-gpu

workshop: $(BOOK_DEPS)
	$(PY) -m booktools.workshop

diagrams: $(TEST_DEPS)
	$(PY) -m booktools.diagrams

doctor:
	$(or $(strip $(PYTHON)),python3) -m booktools.doctor

gpu-env:
	python3 -m venv .venv-gpu
	.venv-gpu/bin/python -m pip install --quiet --disable-pip-version-check -e '.[gpu,test]'

resolve-gpu:
	$(or $(strip $(PYTHON)),python3) -m booktools.resolve

execute:
	$(or $(strip $(PYTHON)),python3) -m booktools.runs measure --mode execute $(if $(LABEL),--label "$(LABEL)") $(NOTEBOOKS)

compare:
	$(or $(strip $(PYTHON)),python3) -m booktools.evidence compare $(if $(REFERENCE),--reference "$(REFERENCE)") $(COMPARE)

# Notebook code is held to 88 columns, the width the book's page shows without clipping.
lint: $(TEST_DEPS)
	$(PY) -m ruff check support booktools tests chapters conftest.py
	$(PY) -m ruff check --line-length 88 --select E501 chapters
	$(PY) -m ruff format --check support booktools tests conftest.py
	$(PY) -m ruff format --check --line-length 88 chapters

clean:
	rm -rf _build
