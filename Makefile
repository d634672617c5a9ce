# The two commands a newcomer needs: `make book` (build the website) and `make test` (every check CI runs).
# Both create .venv on first use and install requirements.txt and tfm into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
NBVAL := -m pytest --nbval --nbval-current-env --nbval-sanitize-with $(CURDIR)/tests/sanitize.cfg
COLAB := _build/colab
# A second numeric path: other softmax/attention kernels (ATEN) and other matrix-product bits (MKL), as another CPU
# would give. A stored output or a trained claim that depends on one CPU's last bits fails here on every machine.
PERTURBED := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE

# Offline, CPU: the stored outputs are CPU outputs. No progress bar appears under a test runner or CI without any
# setting (tfm.training.progress_enabled), so `pytest --nbval chapters/` run directly gives the same outputs.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TFM_DEVICE := cpu
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help install book test lint unit notebooks notebooks-perturbed notebooks-both student-check build-check execute student assignments grade \
	serve freeze clean \
	bench robustness figures slides pdf

help:
	@echo "make book     build the website into _build/html"
	@echo "make test     lint, unit tests, notebooks under strict nbval (as Colab runs them, then on a second numeric"
	@echo "              path), build with warnings as errors"
	@echo "make execute  re-run every notebook in place to refresh its stored outputs"
	@echo "make student  write the student edition (solutions removed) into student/"
	@echo "make assignments  every chapter as an nbgrader assignment in build/course (release/ is what learners get)"
	@echo "make grade CHAPTER=03 SUBMISSIONS=folder  grade a folder of submitted notebooks -> table of scores"
	@echo "make serve    preview the built site on http://localhost:8000"
	@echo "make bench    tfm against torch.nn, and each chapter's execution time against its budget"
	@echo "make robustness  every trained claim over 5 seeds x 3 numeric paths -> appendices/robustness.md (~1 h)"
	@echo "make figures  redraw the schematic SVG figures in assets/ (tools/figures.py)"
	@echo "make slides   one reveal.js deck per course session, from the chapters' slide-tagged cells -> build/slides"
	@echo "make pdf      the whole book as one PDF (Chromium prints the one-page build) -> build/pdf"
	@echo "make lint | make freeze | make clean"

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --keep-going

test: lint unit notebooks-both build-check

# The two nbval passes and the student-edition run go side by side, each on one thread (OMP_NUM_THREADS=1, itself a
# numeric path the notebooks must pass): the book's small tensors gain little from a second thread, and passes that
# each spread over both cores slow each other down many times over.
notebooks-both: $(STAMP)
	OMP_NUM_THREADS=1 $(MAKE) --no-print-directory -j3 --output-sync=target notebooks notebooks-perturbed student-check

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench chapters

unit: $(STAMP)
	$(BIN)/python -m pytest tests

# Each notebook runs as Colab runs it (alone in an empty folder, tfm from a built wheel) and its outputs are compared
# with the stored ones: one execution checks both.
notebooks: $(STAMP)
	$(BIN)/python tools/colab_env.py $(COLAB)
	cd $(COLAB)/chapters && PYTHONPATH= ../env/bin/python $(NBVAL) $(notdir $(NOTEBOOKS))

# The student edition (no solutions), run as a learner runs it: every exercise check must fail on the empty stubs.
student-check: $(STAMP)
	$(BIN)/python tools/check_student_edition.py $(NOTEBOOKS)

notebooks-perturbed: $(STAMP)
	$(PERTURBED) $(BIN)/python $(NBVAL) $(NOTEBOOKS)

build-check: $(STAMP)
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --keep-going

execute: $(STAMP)
	$(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

student: $(STAMP)
	$(BIN)/python tools/student_edition.py --out student $(NOTEBOOKS)

assignments: $(STAMP)
	$(BIN)/python tools/assignments.py $(NOTEBOOKS)

grade: $(STAMP)
	@test -n "$(CHAPTER)" -a -n "$(SUBMISSIONS)" || (echo "usage: make grade CHAPTER=03 SUBMISSIONS=folder"; exit 2)
	$(BIN)/python tools/grade.py $(CHAPTER) $(SUBMISSIONS)

serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

bench: $(STAMP)
	$(BIN)/python bench/bench_tfm.py
	$(BIN)/python bench/time_chapters.py

robustness: $(STAMP)
	$(BIN)/python tools/robustness.py

figures: $(STAMP)
	$(BIN)/python tools/figures.py

slides: $(STAMP)
	$(BIN)/python tools/slides.py build/slides

pdf: $(STAMP)
	$(BIN)/python tools/pdf.py build/pdf/transformer-token-by-token.pdf

freeze: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^tfm' | sed 's/^torch==\(.*\)+cpu/torch==\1/' > requirements.lock.tmp
	@echo "compare requirements.lock.tmp with requirements.txt, keep the header, then remove the .tmp file"

clean:
	rm -rf _build build student .pytest_cache src/*.egg-info
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
