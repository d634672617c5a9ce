# The two commands a newcomer needs: `make book` (build the website) and `make test` (every check CI runs).
# Both create .venv on first use and install requirements.txt and tfm into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
NBVAL := -m pytest --nbval --nbval-current-env --nbval-sanitize-with $(CURDIR)/tests/sanitize.cfg
COLAB := _build/colab
STUDENT_CHECK := _build/student-check
# A second numeric path: other softmax/attention kernels (ATEN) and other matrix-product bits (MKL), as another CPU
# would give. A stored output or a trained claim that depends on one CPU's last bits fails here on every machine.
PERTURBED := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE
PDF := build/pdf/transformer-token-by-token.pdf

# Offline, CPU: the stored outputs are CPU outputs. No progress bar appears under a test runner or CI without any
# setting (tfm.training.progress_enabled), so `pytest --nbval chapters/` run directly gives the same outputs.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TFM_DEVICE := cpu
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help install book test lint unit unit-on-site unit-then-notebooks notebooks notebooks-student notebooks-perturbed build-check execute \
	student assignments grade gradebook serve freeze clean bench time-test robustness scaling data-sweep pretraining-budget block-sweep figures slides pdf pdf-check

help:
	@echo "make book     build the website into _build/html"
	@echo "make test     lint; the site built with warnings as errors, then the unit tests; every notebook under strict"
	@echo "              nbval as Colab runs it, and its student edition on a second numeric path (side by side)"
	@echo "make execute  re-run every notebook in place to refresh its stored outputs"
	@echo "make student  write the student edition (solutions removed) into student/"
	@echo "make assignments  every chapter as an nbgrader assignment in build/course (release/ is what learners get)"
	@echo "make grade CHAPTER=03 SUBMISSIONS=folder  grade a folder of submitted notebooks -> table of scores"
	@echo "make serve    preview the built site on http://localhost:8000"
	@echo "make bench    tfm against torch.nn, and each chapter's execution time against its budget"
	@echo "make robustness  every trained claim over 5 seeds x 3 numeric paths -> appendices/robustness.md (~1 h)"
	@echo "make scaling  chapter 14 checkpoints and loss against model size (hours on a CPU) -> src/tfm/checkpoints/"
	@echo "make data-sweep  chapter 14's larger text: loss against distinct data and against size, and its long-context"
	@echo "              model (on a 2-core CPU, one thread per run: 78, 73 and 23 min; JOBS=, DEVICE=cuda, STEPS=, WIDTH=) -> src/tfm/checkpoints/"
	@echo "make pretraining-budget  chapter 13's masked LM pretrained 12 times longer, local and full attention, 5 seeds"
	@echo "              (~15 min on a 2-core CPU) -> src/tfm/checkpoints/ch13_budget.json"
	@echo "make block-sweep  chapter 15's five blocks, 12 learning rates, 5 seeds (~20 min on a 2-core CPU)"
	@echo "              -> src/tfm/checkpoints/ch15_block_sweep.json"
	@echo "make figures  redraw the schematic SVG figures in src/tfm/schematics/ (tools/figures/)"
	@echo "make slides   one reveal.js deck per course session, and a PDF of each, from the chapters' slide-tagged cells, figures redrawn at slide size -> build/slides"
	@echo "make pdf      the whole book as one PDF (Chromium prints the one-page build) -> build/pdf"
	@echo "make pdf-check  make pdf, then read it back (tests/test_pdf.py; .ci/run does this after make test)"
	@echo "make time-test  each stage of make test, timed against its budget on a fresh copy (bench/time_test.py)"
	@echo "make notebooks-perturbed  the whole book edition on the second numeric path (before committing a chapter)"
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

# Every notebook is executed once per numeric path, in two lanes side by side, one per core:
# - notebooks-student: the student edition (the same cells without the solutions) on a second numeric path, compared
#   with the book's stored outputs: its exercise checks must fail on the stubs exactly as stored (the longest pass);
# - unit-then-notebooks: the website built once with warnings as errors, the unit tests (whose browser test opens
#   it), then `notebooks`: the book edition, solutions included, as Colab runs it (default numeric path).
# Each runs on one thread (OMP_NUM_THREADS=1, itself a numeric path the notebooks must pass): the book's small tensors
# gain little from a second thread, and two lanes on two cores keep the unit tests from waiting on a third.
test: lint
	OMP_NUM_THREADS=1 $(MAKE) --no-print-directory -j2 --output-sync=target notebooks-student unit-then-notebooks

unit-then-notebooks: unit-on-site
	$(MAKE) --no-print-directory notebooks

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench chapters
	$(BIN)/python -m tools.book.page_width

unit: $(STAMP)
	$(BIN)/python -m pytest tests

unit-on-site: build-check
	TFM_SITE=$(CURDIR)/_build/html $(BIN)/python -m pytest tests

# Each notebook runs as Colab runs it (alone in an empty folder, tfm from a built wheel) and its outputs are compared
# with the stored ones: one execution checks both.
notebooks: $(STAMP)
	$(BIN)/python -m tools.book.colab_env $(COLAB)
	cd $(COLAB)/chapters && PYTHONPATH= ../env/bin/python $(NBVAL) $(notdir $(NOTEBOOKS))

# The student edition with the book's stored outputs, run on the second numeric path under strict nbval.
notebooks-student: $(STAMP)
	rm -rf $(STUDENT_CHECK)
	$(BIN)/python -m tools.book.student_edition --keep-outputs --out $(STUDENT_CHECK)/chapters $(NOTEBOOKS) >/dev/null
	cd $(STUDENT_CHECK)/chapters && $(PERTURBED) $(CURDIR)/$(BIN)/python $(NBVAL) $(notdir $(NOTEBOOKS))

# Not part of `make test`: the whole book edition on the second numeric path (for an author before committing).
notebooks-perturbed: $(STAMP)
	$(PERTURBED) $(BIN)/python $(NBVAL) $(NOTEBOOKS)

build-check: $(STAMP)
	rm -rf _build/html
	$(BIN)/jupyter-book build . --warningiserror --keep-going

execute: $(STAMP)
	$(BIN)/python -m tools.book.execute_notebooks $(NOTEBOOKS)

student: $(STAMP)
	$(BIN)/python -m tools.book.student_edition --out student $(NOTEBOOKS)

assignments: $(STAMP)
	$(BIN)/python -m tools.course.assignments $(NOTEBOOKS)

grade: $(STAMP)
	@test -n "$(CHAPTER)" -a -n "$(SUBMISSIONS)" || (echo "usage: make grade CHAPTER=03 SUBMISSIONS=folder"; exit 2)
	$(BIN)/python -m tools.course.grade $(CHAPTER) $(SUBMISSIONS)

gradebook: $(STAMP)
	$(BIN)/python -m tools.course.gradebook $(if $(ROSTER),--roster $(ROSTER))

serve: book
	$(BIN)/python -m http.server --directory _build/html 8000

bench: $(STAMP)
	$(BIN)/python bench/bench_tfm.py
	$(BIN)/python bench/time_chapters.py

# Each stage of `make test` timed against its budget, on a fresh copy of the repository (bench/time_test.py).
time-test: $(STAMP)
	$(BIN)/python bench/time_test.py

robustness: $(STAMP)
	$(BIN)/python -m tools.book.robustness

scaling: $(STAMP)
	$(BIN)/python -m tools.book.scaling

JOBS ?= 1
DEVICE ?= cpu
STEPS ?= 2440
WIDTH ?= 64
data-sweep: $(STAMP)
	$(BIN)/python -m tools.book.data_sweep --jobs $(JOBS) --device $(DEVICE) --steps $(STEPS) --width $(WIDTH)
	$(BIN)/python -m tools.book.data_sweep --jobs $(JOBS) --device $(DEVICE) --widths 16 24 32 128 \
		--out src/tfm/checkpoints/ch14_sizes.json
	$(BIN)/python -m tools.book.data_sweep --jobs $(JOBS) --device $(DEVICE) --widths 64 --length 512 \
		--batch 8 --steps 2440 --positional rotary --save src/tfm/checkpoints \
		--out src/tfm/checkpoints/ch14_long_context.json
	$(BIN)/python -m tools.book.context_use --weights src/tfm/checkpoints \
		--out src/tfm/checkpoints/ch14_context_use.json

pretraining-budget: $(STAMP)
	$(BIN)/python -m tools.book.pretraining_budget --seeds 5 --steps 3000

block-sweep: $(STAMP)
	$(BIN)/python -m tools.book.block_sweep --seeds 5 --jobs 2

figures: $(STAMP)
	$(BIN)/python -m tools.figures

slides: $(STAMP)
	$(BIN)/python -m tools.course.slides $(if $(PLAN),build/slides-$(PLAN) --plan $(PLAN),build/slides)

pdf: $(STAMP)
	$(BIN)/python -m tools.course.pdf $(if $(filter student,$(EDITION)),$(PDF:.pdf=-student.pdf) --edition student,$(PDF))

# The whole PDF edition, built and read back (.ci/run; the unit tests print a two-chapter book instead).
pdf-check: pdf
	TFM_PDF=$(CURDIR)/$(PDF) $(BIN)/python -m pytest tests/test_pdf.py

freeze: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^tfm' | sed 's/^torch==\(.*\)+cpu/torch==\1/' > requirements.lock.tmp
	@echo "compare requirements.lock.tmp with requirements.txt, keep the header, then remove the .tmp file"

clean:
	rm -rf _build build student .pytest_cache src/*.egg-info
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
