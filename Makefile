# GPU Interop Book: the two commands of the README are `make book` and `make test`.
#
# By default both work in the project's own virtual environment, .venv, created here with what pyproject.toml
# lists. Pass PYTHON=... to use an environment you already have instead (the conda environment of
# environment.yml, or the lab GPU host's python3): nothing is installed then.
#
#   make book        build the HTML book into _build/html from the committed notebook outputs (no GPU needed)
#   make test        unit tests, notebook checks, the book check, and nbval on every notebook this machine can run
#   make test-fast   the inner loop: unit tests and doctests, no notebooks, no book build, no slow tests (about a minute on 2 cores)
#   make test-gpu    the same in your GPU environment (GPU_PYTHON below); fails instead of skipping GPU notebooks
#   make execute     on a GPU host: execute notebooks in place, record time, memory and claims (NOTEBOOKS=..., LABEL=...)
#   make compare     on your GPU: run the chapters' claims (COMPARE=chapters/...) and print them beside the book's
#   make lint        ruff over support/, tests/ and the notebooks (notebook code within 88 columns)
#   make workshop    the participant edition in _build/workshop/ (AGENDA=two-hours: its chapters only), a setup check, the teacher's sheet
#   make rehearse    on a GPU of your own: SEATS participants at once under MPS (LIMIT each) run AGENDA; records in runs/
#   make workshop-archive  the participant edition as one zip, for the site's downloads (_build/site-extra/downloads/)
#   make pdf         the whole book as one PDF (needs TeX: xelatex and latexmk; CI builds it), into the site's downloads
#   make diagrams    redraw the explanatory diagrams into chapters/diagrams/ (booktools/diagrams.py)
#   make regenerate  rewrite every generated file from the records: README table, claims page, needs file, diagrams
#   make doctor      on a GPU server: can this machine run the book? one line per check, exit 1 on a blocker
#   make gpu-env     on a GPU server: create .venv-gpu, upgrade its pip, install the `gpu` and `test` extras exactly as locked
#   make lock        from any machine: re-resolve the `gpu` and `test` extras into the lock file (CPython 3.12, Linux x86_64) with uv
#   make resolve-gpu from any machine: uv's resolver for the `gpu` extra (CPython 3.12, manylinux_2_28), installs nothing
#   make test-gpu-16gb  make test-gpu on a GPU shrunk to 16 GB per process with CUDA MPS (a GPU of your own);
#                    MPS_DEVICES="0 1" limits both GPUs of a two-GPU host (chapter 7)

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
# The Python of the GPU targets (test-gpu, test-gpu-16gb, execute, compare, rehearse, doctor): PYTHON when given,
# else that of .venv-gpu (make gpu-env) when it exists, else python3 (an activated environment's). Each GPU target
# first asks booktools.gpu_ready whether it can run here: without a GPU or a library it says so in one line.
GPU_VENV ?= .venv-gpu
GPU_PYTHON := $(or $(strip $(PYTHON)),$(if $(wildcard $(GPU_VENV)/bin/python),$(GPU_VENV)/bin/python,python3))
GPU_READY := $(GPU_PYTHON) -m booktools.gpu_ready
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

.PHONY: help book test test-fast regenerate test-gpu test-gpu-16gb execute compare lint clean doctor gpu-env resolve-gpu lock diagrams workshop workshop-archive pdf rehearse

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
	@$(GPU_READY) test-gpu
	$(MAKE) test XDIST= PYTHON=$(GPU_PYTHON) PYTEST_ARGS="--require-gpu $(PYTEST_ARGS)"

# The GPUs test-gpu-16gb limits: GPU 0, or "0 1" on a two-GPU host, where chapter 7's workers use both.
MPS_DEVICES ?= 0
test-gpu-16gb:
	@$(GPU_READY) test-gpu-16gb
	$(GPU_PYTHON) -m booktools.mps --limit 16G $(foreach d,$(MPS_DEVICES),--device $(d)) -- \
		$(MAKE) test-gpu PYTHON=$(GPU_PYTHON)

workshop: $(BOOK_DEPS)
	$(PY) -m booktools.workshop $(if $(filter command line environment,$(origin AGENDA)),--agenda $(AGENDA)) \
	  $(if $(BOOK_URL),--book-url "$(BOOK_URL)")
	$(if $(filter command line environment,$(origin AGENDA)),$(PY) -m booktools.plan $(AGENDA) _build/workshop-teacher/plan.md)

# The book's version, written once in pyproject.toml (booktools/edition.py puts it in the page header too).
VERSION = $(shell python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
# What `make book` adds to the site when it is there (booktools/edition.py): the downloads of this edition.
DOWNLOADS := _build/site-extra/downloads

EDITION_NAME = gpu-interop-book-participant-edition-$(VERSION)
workshop-archive: $(BOOK_DEPS)
	rm -rf _build/archive $(DOWNLOADS)/gpu-interop-book-participant-edition-*.zip
	$(PY) -m booktools.workshop _build/archive/$(EDITION_NAME)
	mkdir -p $(DOWNLOADS)
	cd _build/archive && $(abspath $(PY)) -m zipfile -c $(abspath $(DOWNLOADS))/$(EDITION_NAME).zip $(EDITION_NAME)/

# Jupyter Book's LaTeX build (xelatex): TeX is not installed on every machine, so CI builds it (book.yml).
pdf: $(BOOK_DEPS)
	$(PY) -c 'from jupyter_book.cli.main import main; main()' build . --builder pdflatex
	mkdir -p $(DOWNLOADS)
	cp _build/latex/book.pdf $(DOWNLOADS)/gpu-interop-book-$(VERSION).pdf

# A rehearsal of a workshop: AGENDA is two-hours, half-day or full-day (the teachers' page); SEATS times LIMIT
# must fit the card, and LIMIT must hold the agenda's largest recorded peak. REHEARSE_ARGS passes more options
# (--skip-memory-check, --two-kernels, --chapters ..., --timeout S; python -m booktools.rehearse --help).
AGENDA ?= two-hours
SEATS ?= 4
LIMIT ?= 16G
REHEARSE_ARGS ?=
rehearse:
	$(GPU_PYTHON) -m booktools.rehearse --agenda $(AGENDA) --seats $(SEATS) --limit $(LIMIT) $(REHEARSE_ARGS)

diagrams: $(TEST_DEPS)
	$(PY) -m booktools.diagrams

# Every generated file from the committed records (booktools/regenerate.py); tests/test_regenerate.py diffs them.
regenerate: $(TEST_DEPS)
	$(PY) -m booktools.regenerate

doctor:
	$(GPU_PYTHON) -m booktools.doctor

# The gpu and test extras resolved together for CPython 3.12 on Linux x86_64 (glibc 2.28+): the exact stack
# `make gpu-env` installs. Together, because what each resolves to alone may not install beside the other (cuDF's
# rich wants markdown-it-py 4, the book's myst-parser 3 wants 3).
GPU_LOCK ?= locks/gpu-cp312-linux-x86_64.txt
# The Python that creates $(GPU_VENV) (make gpu-env): the lock is for CPython 3.12.
VENV_PYTHON ?= python3
# `make lock LOCK_ARGS=--upgrade` takes the newest versions inside pyproject's ranges; without it uv keeps the
# lock's pins that still satisfy them.
LOCK_ARGS ?=

# pip is upgraded first: older pips (23.x, and 24.0, the one Python 3.12's venv ships) resolve the gpu extra
# for a very long time or not at all. The gpu extra is installed at the lock's versions (pip's constraints);
# `make gpu-env GPU_LOCK=` installs pyproject's ranges instead, on any Python 3.11+.
gpu-env:
	@if [ -n "$(GPU_LOCK)" ] && ! $(VENV_PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then \
	  echo "$(GPU_LOCK) is for CPython 3.12 and $(VENV_PYTHON) is $$($(VENV_PYTHON) -V 2>&1): name a 3.12 with" \
	       "VENV_PYTHON=python3.12, or install the ranges with GPU_LOCK= (empty)" >&2; exit 1; fi
	$(VENV_PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip install --disable-pip-version-check --upgrade pip
	$(GPU_VENV)/bin/python -m pip install --disable-pip-version-check $(if $(GPU_LOCK),--constraint $(GPU_LOCK)) -e '.[gpu,test]'

# The lock: uv resolves the gpu and test extras for the GPU server's platform from the index's metadata, wheels only, except
# gatspy (py-ecg-detectors needs it; PyPI has no wheel of it), which pip builds from its source on the server.
lock: $(TEST_DEPS)
	mkdir -p $(dir $(GPU_LOCK))
	UV_PYTHON_DOWNLOADS=never $(PY) -m uv pip compile pyproject.toml --extra gpu --extra test \
	  --python-platform x86_64-manylinux_2_28 --python-version 3.12 --only-binary :all: --no-binary gatspy \
	  --custom-compile-command 'make lock' --output-file $(GPU_LOCK) $(LOCK_ARGS)

# uv (from the test extra) resolves for another platform from the index's metadata, in seconds, with any pip.
resolve-gpu: $(TEST_DEPS)
	$(PY) -m booktools.resolve

execute:
	@$(GPU_READY) execute $(NOTEBOOKS)
	$(GPU_PYTHON) -m booktools.runs measure --mode execute $(if $(LABEL),--label "$(LABEL)") $(NOTEBOOKS)

compare:
	@$(GPU_READY) compare $(COMPARE)
	$(GPU_PYTHON) -m booktools.evidence compare $(if $(REFERENCE),--reference "$(REFERENCE)") $(COMPARE)

# Notebook code is held to 88 columns, the width the book's page shows without clipping.
lint: $(TEST_DEPS)
	$(PY) -m ruff check support booktools tests chapters conftest.py
	$(PY) -m ruff check --line-length 88 --select E501 chapters
	$(PY) -m ruff format --check support booktools tests conftest.py
	$(PY) -m ruff format --check --line-length 88 chapters

clean:
	rm -rf _build
