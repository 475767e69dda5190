# devplace: `make demo` runs the main job, `make test` runs everything CI checks. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
export PYTHONDONTWRITEBYTECODE := 1
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends

.PHONY: demo test lint typecheck layers unit bench protos check-protos clean etcd

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e . --group dev
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m devplace.cli demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

layers: $(STAMP)
	$(VENV)/bin/lint-imports

# The etcd store backend's tests start Debian's etcd (etcd-server); install it when absent (we run as root).
etcd:
	@command -v etcd >/dev/null || $(APT_INSTALL) etcd-server >/dev/null 2>&1 \
		|| { apt-get update -qq && $(APT_INSTALL) etcd-server >/dev/null; }

unit: $(STAMP) etcd
	$(PY) tools/run_pytest.py -q -p no:cacheprovider

check-protos: $(STAMP)
	$(PY) tools/protos.py --check

test: lint typecheck layers check-protos unit

protos: $(STAMP)
	$(PY) tools/protos.py

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
