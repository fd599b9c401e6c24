# GPU Interop Book: the two commands of the README are `make book` and `make test`.
#
# By default both work in the project's own virtual environment, .venv, created here with what pyproject.toml
# lists. Pass PYTHON=... to use an environment you already have instead (the conda environment of
# environment.yml, or the lab GPU host's python3): nothing is installed then.
#
#   make book        build the HTML book into _build/html from the committed notebook outputs (no GPU needed)
#   make test        unit tests, notebook checks, the book check, and nbval on every notebook this machine can run
#   make test-fast   the inner loop: unit tests and doctests, no notebooks, no book build, no slow tests (< 1 min)
#   make test-gpu    the same in your GPU environment (PYTHON, default python3); fails instead of skipping GPU notebooks
#   make execute     on a GPU host: execute notebooks in place, record time, memory and claims (NOTEBOOKS=..., LABEL=...)
#   make compare     on your GPU: run the chapters' claims (COMPARE=chapters/...) and print them beside the book's
#   make lint        ruff over support/, tests/ and the notebooks (notebook code within 88 columns)
#   make workshop    the participant edition in _build/workshop/: chapters without solutions or outputs, their files, a README
#   make rehearse    on a GPU of your own: SEATS participants at once under MPS (LIMIT each) run AGENDA; records in runs/
#   make diagrams    redraw the explanatory diagrams into chapters/diagrams/ (booktools/diagrams.py)
#   make regenerate  rewrite every generated file from the records: README table, claims page, needs file, diagrams
#   make doctor      on a GPU server: can this machine run the book? one line per check, exit 1 on a blocker
#   make gpu-env     on a GPU server: create .venv-gpu, upgrade its pip, install the `gpu` and `test` extras
#   make resolve-gpu from any machine: uv's resolver for the `gpu` extra (CPython 3.12, manylinux_2_28), installs nothing
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
# Not --quiet: when an install fails, pip's explanation (a conflict's cause) is printed at its normal level.
PIP := $(VENV)/bin/python -m pip install --disable-pip-version-check
# PyTorch's index of CPU-only builds. PyPI's torch for Linux x86_64 is the CUDA build, which brings about twenty
# nvidia-* wheels (several GB): `make test` takes torch alone from this index, or from a local wheel directory
# pip is configured with (--find-links), and everything else from the package index. TORCH_CPU_INDEX=URL names
# a mirror of it; TORCH_CPU_INDEX= (empty) takes PyPI's build.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# The torch requirement of the cpu extra, read from pyproject.toml.
TORCH_PIN := import re, tomllib; extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["cpu"]; print(next(r for r in extra if re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] == "torch"))
# Exit status 0 when the environment holds the book's GPU stack (the gpu extra or environment.yml): `make test`
# then installs the test extra alone, so that the CPU builds of the cpu extra never replace the CUDA ones.
HAS_GPU_STACK := import sys, importlib.metadata as m; sys.exit(0 if {(d.metadata["Name"] or "").lower() for d in m.distributions()} & set(sys.argv[1:]) else 1)
GPU_MARKERS := cudf-cu13 rmm-cu13 cupy-cuda13x cudf rmm cupy

.PHONY: help book test test-fast regenerate test-gpu test-gpu-16gb execute compare lint clean doctor gpu-env resolve-gpu diagrams workshop rehearse

help:
	@sed -n 's/^#   //p' Makefile

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip

$(VENV)/.installed-book: pyproject.toml | $(VENV)/bin/python
	$(PIP) -e '.[book]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	@if $(VENV)/bin/python -c '$(HAS_GPU_STACK)' $(GPU_MARKERS); then \
	  echo "$(VENV) holds the GPU stack: installing the test extra alone, not the cpu extra's CPU builds"; \
	  $(PIP) -e '.[test]'; \
	else \
	  if [ -n "$(TORCH_CPU_INDEX)" ]; then \
	    torch="$$($(VENV)/bin/python -c '$(TORCH_PIN)')"; \
	    echo "$$torch, the CPU build: from $(TORCH_CPU_INDEX) or a local wheel (pip warns if the index is unreachable)"; \
	    $(PIP) --upgrade --no-deps --retries 2 --index-url $(TORCH_CPU_INDEX) "$$torch" || { \
	      echo "The CPU build of $$torch is neither on $(TORCH_CPU_INDEX) nor in a local wheel directory (pip said" \
	           "why above). Name a mirror of PyTorch's CPU index with TORCH_CPU_INDEX=URL, or take PyPI's build with" \
	           "TORCH_CPU_INDEX= (on Linux x86_64 the CUDA build: about twenty nvidia-* wheels, several GB)." >&2; \
	      exit 1; }; \
	  fi; \
	  $(PIP) -e '.[test,cpu]'; \
	fi
	touch $@

# Sphinx copies _static/ only when a page is rewritten: a changed style sheet rebuilds every page (--all).
STATIC_CHANGED = $(shell [ -e _build/html/.buildinfo ] && find _static -newer _build/html/.buildinfo -print -quit)

book: $(BOOK_DEPS)
	$(PY) -c 'from jupyter_book.cli.main import main; main()' build . --builder html --warningiserror --nitpick --keep-going $(if $(STATIC_CHANGED),--all)

# pytest-xdist (in the test extra) spreads the tests over the cores, one test file to a worker (nbval runs a
# notebook's cells in order, in one kernel); where it is not installed the tests run in one process. test-gpu runs
# one notebook at a time on the GPU: XDIST= there.
XDIST = $(shell $(PY) -c 'import xdist' 2>/dev/null && printf '%s' '-n auto --dist loadfile')

test: $(TEST_DEPS)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The inner loop: support/, booktools/ and tests/ without the tests marked slow; chapters/ (nbval) is not collected.
test-fast: $(TEST_DEPS)
	$(PY) -m pytest support booktools tests -m "not slow" -q $(XDIST) $(PYTEST_ARGS)

test-gpu:
	$(MAKE) test XDIST= PYTHON=$(or $(strip $(PYTHON)),python3) PYTEST_ARGS="--require-gpu $(PYTEST_ARGS)"

test-gpu-16gb:
	$(or $(strip $(PYTHON)),python3) -m booktools.mps --limit 16G -- $(MAKE) test-gpu

workshop: $(BOOK_DEPS)
	$(PY) -m booktools.workshop

# A rehearsal of a workshop: AGENDA is two-hours, half-day or full-day (the teachers' page); SEATS times LIMIT
# must fit the card, and LIMIT must hold the agenda's largest recorded peak. REHEARSE_ARGS passes more options
# (--skip-memory-check, --chapters ..., --timeout S; python -m booktools.rehearse --help).
AGENDA ?= two-hours
SEATS ?= 4
LIMIT ?= 16G
REHEARSE_ARGS ?=
rehearse:
	$(or $(strip $(PYTHON)),python3) -m booktools.rehearse --agenda $(AGENDA) --seats $(SEATS) --limit $(LIMIT) $(REHEARSE_ARGS)

diagrams: $(TEST_DEPS)
	$(PY) -m booktools.diagrams

# Every generated file from the committed records (booktools/regenerate.py); tests/test_regenerate.py diffs them.
regenerate: $(TEST_DEPS)
	$(PY) -m booktools.regenerate

doctor:
	$(or $(strip $(PYTHON)),python3) -m booktools.doctor

# pip is upgraded first: older pips (23.x, and 24.0, the one Python 3.12's venv ships) resolve the gpu extra
# for a very long time or not at all.
gpu-env:
	python3 -m venv .venv-gpu
	.venv-gpu/bin/python -m pip install --disable-pip-version-check --upgrade pip
	.venv-gpu/bin/python -m pip install --disable-pip-version-check -e '.[gpu,test]'

# uv (from the test extra) resolves for another platform from the index's metadata, in seconds, with any pip.
resolve-gpu: $(TEST_DEPS)
	$(PY) -m booktools.resolve

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
