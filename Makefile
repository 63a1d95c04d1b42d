# The two commands of the README: `make demo` and `make test`.
# Both create .venv when missing and install the project into it; `make test`
# also installs the system tools the tests use (mosquitto, shellcheck, chromium).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test setup system-deps lint format bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and pinned, so that nothing else can pull another build.
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

system-deps:
	@if ! command -v mosquitto >/dev/null && ! test -x /usr/sbin/mosquitto \
	   || ! command -v mosquitto_sub >/dev/null || ! command -v shellcheck >/dev/null \
	   || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null \
	   || ! ldconfig -p | grep -q libturbojpeg; then \
	  echo "installing mosquitto, mosquitto-clients, shellcheck, chromium, chromium-driver, libturbojpeg0 (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    mosquitto mosquitto-clients shellcheck openssl chromium chromium-driver \
	    libturbojpeg0 >/dev/null; \
	fi

demo: $(STAMP) system-deps
	$(PY) main.py demo

test: $(STAMP) system-deps
	@$(PY) -m ruff check . && $(PY) -m ruff format --check .
	@set +e; $(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint:
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

format:
	$(PY) -m ruff format . && $(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
