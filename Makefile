# devplace: `make demo` runs the main job, `make test` runs everything CI checks. Both set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# uv installs exactly what uv.lock holds; its own version is the dev group's pin (so the lock holds it too).
UV_VERSION := $(shell sed -n 's/^ *"uv==\([^"]*\)",$$/\1/p' pyproject.toml)
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml uv.lock | sha1sum | cut -c1-12)
export PYTHONDONTWRITEBYTECODE := 1
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_PYTHON_DOWNLOADS := never
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends

.PHONY: image image-version demo test lint typecheck layers unit bench protos check-protos check-lock lock lock-upgrade uv clean etcd devices venv

# --locked: the install fails, changing nothing, when pyproject.toml and uv.lock disagree (refresh with `make lock`).
$(STAMP): pyproject.toml uv.lock | uv
	$(UV) sync --locked --quiet
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# The lock changes only on purpose: `lock` after an edit of pyproject.toml (keeps every other pin), `lock-upgrade` to
# move every pin to the newest release the ranges allow. Both need a uv of the pinned version (`make venv` puts it).
lock: uv
	$(UV) lock

lock-upgrade: uv
	$(UV) lock --upgrade

uv:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(UV) --version 2>/dev/null | grep -qx "uv $(UV_VERSION)" || $(PY) -m pip install -q "uv==$(UV_VERSION)"

check-lock: uv
	$(UV) lock --check

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

# Real peers for the device tests: umockdev presents recorded devices to real libudev, podman with runc resolves CDI
# device names in a container; Chromium runs the dashboard's browser tests (Playwright drives it). Installed when
# absent, as etcd is.
DEBIAN_TEST_PACKAGES := umockdev gir1.2-umockdev-1.0 podman runc busybox-static chromium chromium-driver
devices:
	@dpkg -s $(DEBIAN_TEST_PACKAGES) >/dev/null 2>&1 || $(APT_INSTALL) $(DEBIAN_TEST_PACKAGES) >/dev/null 2>&1 \
		|| { apt-get update -qq && $(APT_INSTALL) $(DEBIAN_TEST_PACKAGES) >/dev/null; }

unit: $(STAMP) etcd devices
	$(PY) tools/run_pytest.py -q -p no:cacheprovider

check-protos: $(STAMP)
	$(PY) tools/protos.py --check

test: check-lock lint typecheck layers check-protos unit

protos: $(STAMP)
	$(PY) tools/protos.py

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# The container image (deploy/kubernetes/Dockerfile), labelled with what `devplace --version` answers for this tree.
IMAGE ?= devplace
image-version: $(STAMP)
	@$(PY) -m devplace.cli version

image: $(STAMP)
	docker build -f deploy/kubernetes/Dockerfile --build-arg DEVPLACE_VERSION="$$($(PY) -m devplace.cli version)" \
		-t $(IMAGE):$$($(PY) -m devplace.cli version) .
