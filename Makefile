# Two commands set everything up on a fresh machine:  make run   and   make test
# Each creates (or refreshes, when pyproject.toml changed) its own virtual environment.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck importcheck unit explore unit-core-noqt bench screenshots dist smoke clean

$(STAMP): pyproject.toml
	@echo "Setting up $(VENV) and installing VRAM Planner's dependencies (first start only: about a minute)..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	@echo "Starting VRAM Planner..."
	$(VENV)/bin/vramplan

test: lint typecheck importcheck unit

lint: $(STAMP)
	$(PY) -m ruff check core gui tests benchmarks tools

typecheck: $(STAMP)
	$(PY) -m mypy

importcheck: $(STAMP)
	$(VENV)/bin/lint-imports

unit: $(STAMP)
	$(PY) -m pytest

# The property tests with fresh random draws (the suite's own draws repeat: tests/conftest.py). Run it
# now and then, several times; an example it finds becomes a plain test before the fix.
explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -p no:cacheprovider $$(grep -rl "@given" tests)

# tests/core in a venv with neither Qt nor pytest-qt: proves core and its tests need no GUI.
CORE_VENV  ?= .venv-core
CORE_PY    := $(CORE_VENV)/bin/python
CORE_STAMP := $(CORE_VENV)/.installed

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(CORE_VENV)
	$(CORE_PY) -m pip install --quiet --upgrade pip
	$(CORE_PY) -m pip install --quiet --no-deps -e .
	$(CORE_PY) -m pip install --quiet 'pytest>=8' 'hypothesis==6.170.29' 'PyYAML>=6.0'  # core's one dependency (core/runconfig)
	touch $(CORE_STAMP)

unit-core-noqt: $(CORE_STAMP)
	@! $(CORE_PY) -c "import PySide6" 2>/dev/null || (echo "PySide6 is installed in $(CORE_VENV)"; exit 1)
	$(CORE_PY) -m pytest tests/core -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/estimate_speed.py

# Every picture the README and docs/ show: the walkthrough's (three sizes, light and dark, training and
# inference, the Diagnosis tab visible: docs/walkthrough/), the README's window sizes and feature
# pictures, and docs/LOCAL_MACHINE.md's. Look at them after any change to the window.
SHOT_SIZES := 1024x700 1280x720 1920x1080
screenshots: $(STAMP)
	mkdir -p docs/walkthrough
	for size in $(SHOT_SIZES); do for theme in light dark; do \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/walkthrough/training-$$size-$$theme.png --size $$size --theme $$theme --diagnosis || exit 1; \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/walkthrough/inference-$$size-$$theme.png --size $$size --theme $$theme --diagnosis --inference || exit 1; \
	done; done
	for size in 1280x720 1920x1080; do for theme in light dark; do \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/window-$$size-$$theme.png --size $$size --theme $$theme || exit 1; \
	done; done
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/screenshot.png
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/diagnosis.png --diagnosis
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/parallel.png --parallel
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/serving.png --serving
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/comparison.png --compare
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/local-machine.png --local
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshot docs/export-launch.png --export deepspeed

clean:
	rm -rf $(VENV) $(CORE_VENV) build dist .pytest_cache .mypy_cache .ruff_cache

# ---- standalone binaries (README: "Standalone binaries") -------------------------------------
# A separate venv with PyInstaller, so the dev venv stays lean. `make dist smoke` is what
# CI runs after `make test`; `make bench-startup` measures size and start-up time.
DIST_VENV  ?= .venv-dist
DIST_PY    := $(DIST_VENV)/bin/python
DIST_STAMP := $(DIST_VENV)/.installed

.PHONY: dist-onefile bench-startup

$(DIST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_PY) -m pip install --quiet --upgrade pip
	$(DIST_PY) -m pip install --quiet -e '.[dist]'
	touch $(DIST_STAMP)

dist: $(DIST_STAMP)
	$(DIST_PY) packaging/build.py

dist-onefile: $(DIST_STAMP)
	$(DIST_PY) packaging/build.py --onefile

smoke:
	packaging/smoke_test.sh

bench-startup: $(DIST_STAMP)
	$(DIST_PY) benchmarks/startup.py
