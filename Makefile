# Two commands a new user needs: `make run` (whole platform on embedded defaults) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install run test lint typecheck check browser clean models

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("Python >= 3.11 is required, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e ./client  # gpuctl (its dependencies are in the lock)
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) manage.py runplatform

# Debian's chromium for the browser tests (Playwright cannot download browsers here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) \
	      || echo "warning: could not install chromium; browser tests will be skipped"; \
	  else echo "note: chromium not found and not root; browser tests will be skipped"; fi; }

test: install browser
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy scheduler
	$(VENV)/bin/mypy jobs images frontend observability workspaces platform/accounts platform/quotas platform/config
	$(VENV)/bin/mypy client/gpuctl

check: lint typecheck test

# Trained interference models are artefacts under var/models/, rebuilt here, never committed.
DATA ?= ../shared/data
models: install
	$(PY) -m scheduler interference train --data $(DATA)

# The published result set re-run from this checkout (at most 2 processes; the model first, as the set
# was made with it). Compare with the committed files: $(PY) -m scheduler results check --rerun DIR.
.PHONY: results
RESULTS_OUT ?= docs/results
RESULTS_SET ?= sim
results: models
	$(PY) -m scheduler results run --data $(DATA) --out $(RESULTS_OUT) --set $(RESULTS_SET) --jobs 2

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
