# The two commands a newcomer needs: `make book` (build the website) and `make test` (every check CI runs).
# Both create .venv on first use and install requirements.txt and tfm into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))

# Offline, deterministic, no progress bars: the stored outputs are CPU outputs produced under these settings.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TFM_DEVICE := cpu
export TFM_PROGRESS := 0
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help install book test lint unit notebooks build-check execute student serve freeze clean bench

help:
	@echo "make book     build the website into _build/html"
	@echo "make test     lint, unit tests, notebooks under nbval (strict), build with warnings as errors"
	@echo "make execute  re-run every notebook in place to refresh its stored outputs"
	@echo "make student  write the student edition (solutions removed) into student/"
	@echo "make serve    preview the built site on http://localhost:8000"
	@echo "make lint | make bench | make freeze | make clean"

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --keep-going

test: lint unit notebooks build-check

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench chapters

unit: $(STAMP)
	$(BIN)/python -m pytest tests

notebooks: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg $(NOTEBOOKS)

build-check: $(STAMP)
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --keep-going

execute: $(STAMP)
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

student: $(STAMP)
	$(BIN)/python tools/student_edition.py --out student $(NOTEBOOKS)

serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

bench: $(STAMP)
	$(BIN)/python bench/bench_tfm.py

freeze: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^tfm' | sed 's/^torch==\(.*\)+cpu/torch==\1/' > requirements.lock.tmp
	@echo "compare requirements.lock.tmp with requirements.txt, keep the header, then remove the .tmp file"

clean:
	rm -rf _build build student .pytest_cache src/*.egg-info
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
