# Two entry points, both self-contained on a fresh machine:
#   make run   -> the main job
#   make test  -> lint + test suite + documentation build
# Both create .venv on first use. torch is installed first, pinned, so pip takes the CPU wheel on disk
# instead of resolving a CUDA build.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint docs venv clean-venv mutation

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq torch==2.13.0
	$(PY) -m pip install -qq -c constraints.txt -e ".[dev,docs,video,cluster,server,study]"
	@# the ELBO kernel's one-off numba compilation (about a minute), so no run or test pays it
	$(PY) -c 'from torchrl_vase.kernels import warm_up; warm_up()'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) recipes/trpo_vase.py $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# one worker a core, each given whole test modules (a module's fixtures are made once) in the order
# conftest.py collects them, the longest first; PYTEST_ARGS="-n 0" runs the suite in one process
test: lint
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)
	$(MAKE) docs

# the documentation site; --strict turns every warning (a broken link, an unknown reference, a
# docstring that does not match its signature) into a failure (--quiet would hide them from it)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	@# the site works offline: no script, stylesheet or font fetched from another host
	@! grep -rEl '<(script|link)[^>]*(src|href)="(https?:)?//' site --include=*.html \
		|| (echo "the built site loads files from another host (above)"; exit 1)

# mutation testing of the core (minutes to hours a module; not part of `make test`): each module's
# score into docs/mutation.md; MODULES="gaussian trpo" for some, SAMPLE=150 for that many of a
# module's mutants drawn at random (kernels.py has 1,569)
mutation: $(STAMP)
	$(PY) -m pip install -qq -c constraints.txt -e ".[mutation]"
	$(PY) recipes/benchmarks/mutation.py --report docs/mutation.md $(if $(MODULES),--modules $(MODULES)) $(if $(SAMPLE),--sample $(SAMPLE))

clean-venv:
	rm -rf $(VENV)
