# The README's quick start is `make demo` and `make test`; both install what they need first.
# Python 3.11 or newer: python3.11 where there is one (the local default here), else python3.
PY      ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCESS_KEY_ID ?= testing
export AWS_SECRET_ACCESS_KEY ?= testing
export POWERTOOLS_TRACE_DISABLED ?= true

.PHONY: install demo test lint typecheck unit fast template-check sam-build chaos soak bench scale-model local clean lock explore

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "error: jobsched needs Python 3.11 or newer; set PY=/path/to/python3.11+"; exit 1; }
	@echo "make install: jobsched and its development tools into $(VENV)/ (about 2 minutes the first time)"
	@test -x $(BIN)/python || { echo "make install: creating $(VENV)/ with $(PY)"; $(PY) -m venv $(VENV); }
	@echo "make install: upgrading pip"
	@$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	@echo "make install: installing jobsched[dev] (boto3, Powertools, moto, SAM CLI, AWS CLI, pytest, ...); pip lists each package"
	$(BIN)/pip install --progress-bar off --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)
	@echo "make install: done ($(BIN)/jobsched, $(BIN)/aws, $(BIN)/sam)"

demo: install
	$(BIN)/jobsched demo

local: install
	$(BIN)/jobsched local

test: install lint typecheck template-check unit

lint: install
	$(BIN)/ruff check layers tools functions tests scripts
	$(BIN)/ruff format --check layers tools functions tests scripts

# The Lambda entry points too, one at a time (each is a module named app). Powertools' handler
# decorators (inject_lambda_context, log_metrics) are not typed precisely enough for strict mode.
typecheck: install
	$(BIN)/mypy
	@for f in functions/*/; do \
	  (cd $$f && MYPYPATH=$(CURDIR)/layers/handlers:$(CURDIR)/layers/jobsched:$(CURDIR)/tools $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	    --disable-error-code untyped-decorator app.py) || exit 1; done

template-check: install
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --template-file template.yaml --region $(AWS_DEFAULT_REGION)
	$(BIN)/sam validate --lint --template-file template.yaml --region $(AWS_DEFAULT_REGION)
	$(MAKE) --no-print-directory sam-build

# The layer's lock: its runtime dependencies only (requirements.in; never the dev extra, so no SAM
# CLI), resolved for the Lambda runtime's Python on any platform, into the requirements.txt that
# sam build installs. Run it after changing requirements.in; tests/unit/test_lock.py checks both.
lock: install
	$(BIN)/uv pip compile layers/jobsched/requirements.in --universal --python-version 3.12 \
	  --custom-compile-command "make lock" -o layers/jobsched/requirements.txt

# The Lambda runtime is python3.12 on arm64; sam build needs that interpreter locally (no Docker
# here) and pip fetches aarch64 wheels for the layers (the recipe checks that none is x86_64).
# With pyenv, PYENV_VERSION exposes it beside 3.11; elsewhere, any python3.12 on PATH will do.
SAM_PYENV ?= 3.11.7:3.12.1
sam-build: install
	@if PYENV_VERSION=$(SAM_PYENV) python3.12 --version >/dev/null 2>&1; then \
	  PYENV_VERSION=$(SAM_PYENV) $(BIN)/sam build --build-dir .aws-sam/build --cache-dir .aws-sam/cache \
	    --region $(AWS_DEFAULT_REGION) >/dev/null && \
	  test -f .aws-sam/build/JobschedLayer/python/jobsched/__init__.py && \
	  ls .aws-sam/build/JobschedLayer/python/pydantic_core/*aarch64-linux-gnu.so >/dev/null && \
	  ! find .aws-sam/build -name '*x86_64*.so' | grep -q . && \
	  echo "sam build: ok (layers and five functions built for python3.12 on arm64, no x86_64 binaries)"; \
	else echo "sam build: skipped, no python3.12 interpreter here"; fi

unit: install
	$(BIN)/pytest -n 2 --dist loadfile

# The pure core and the store and queue contracts (memory and moto), without the tests marked slow
# (local stack, multi-process, chaos): the quick check while editing. make test runs everything.
fast: install
	$(BIN)/pytest -n 2 --dist loadfile -m "not slow" tests/unit tests/contract

chaos: install
	$(BIN)/jobsched chaos --seed 1 --jobs 150 --hours 12

# Every schedule of the core actor sets with at most 4 preemptions (issue 25; tests/explore runs k=3).
explore: install
	$(BIN)/python -m jobsched_tools.explore -k 4 --json

soak: install
	$(BIN)/python scripts/soak.py

bench: install
	$(BIN)/jobsched bench

scale-model: install
	$(BIN)/python scripts/scale_model.py

clean:
	rm -rf $(VENV) .aws-sam .mypy_cache .ruff_cache
