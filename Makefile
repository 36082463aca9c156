# The README's quick start is `make demo` and `make test`; both install what they need first.
# Python 3.11 or newer: python3.11 where there is one (the local default here), else python3.
PY      ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# The SAM CLI, cfn-lint and the AWS CLI pin their own versions of what the layer ships (pydantic,
# botocore): they live apart, in .venv-tools/, so that .venv runs exactly the layer's lock.
TOOLS_VENV := .venv-tools
TOOLS   := $(TOOLS_VENV)/bin
TOOLS_STAMP := $(TOOLS_VENV)/.installed
LOCK    := layers/jobsched/requirements.txt
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCESS_KEY_ID ?= testing
export AWS_SECRET_ACCESS_KEY ?= testing
export POWERTOOLS_TRACE_DISABLED ?= true

.PHONY: install demo test lint typecheck unit fast template-check sam-build chaos soak bench scale-model local clean lock explore

install: $(STAMP)

# Two venvs, one command. .venv: jobsched[dev] with the layer's lock as constraints, so that every
# package the layer ships (pydantic, pydantic-core, Powertools, ...) has exactly its locked version
# where the tests run. .venv-tools: the pyproject's `tools` group (SAM CLI, cfn-lint, AWS CLI),
# whose commands are linked into .venv/bin (`sam`, `cfn-lint`, `aws` work from either, and after
# `. .venv/bin/activate`). The SAM CLI and the AWS CLI an older .venv still holds are taken out
# of it (moto[server] brings a cfn-lint of its own into .venv; it pins nothing of the lock).
$(STAMP): pyproject.toml $(LOCK) $(TOOLS_STAMP)
	@echo "make install: jobsched and its development tools into $(VENV)/ (about 2 minutes the first time)"
	@test -x $(BIN)/python || { echo "make install: creating $(VENV)/ with $(PY)"; $(PY) -m venv $(VENV); }
	@echo "make install: upgrading pip"
	@$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	@echo "make install: installing jobsched[dev] (boto3, Powertools, moto, pytest, ...) at the layer's locked versions ($(LOCK)); pip lists each package"
	$(BIN)/pip install --progress-bar off --disable-pip-version-check -e '.[dev]' -c $(LOCK)
	@$(BIN)/pip uninstall -q -y aws-sam-cli aws-sam-translator awscli 2>/dev/null || true
	@for tool in sam cfn-lint aws; do ln -sf $(abspath $(TOOLS))/$$tool $(BIN)/$$tool; done
	@touch $(STAMP)
	@echo "make install: done ($(BIN)/jobsched; $(BIN)/sam, $(BIN)/cfn-lint and $(BIN)/aws from $(TOOLS_VENV)/)"

$(TOOLS_STAMP): pyproject.toml
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "error: jobsched needs Python 3.11 or newer; set PY=/path/to/python3.11+"; exit 1; }
	@test -x $(TOOLS)/python || { echo "make install: creating $(TOOLS_VENV)/ with $(PY)"; $(PY) -m venv $(TOOLS_VENV); }
	@$(TOOLS)/pip install -q --disable-pip-version-check --upgrade pip
	@echo "make install: installing the SAM CLI, cfn-lint and the AWS CLI into $(TOOLS_VENV)/ (pyproject's tools group)"
	$(TOOLS)/pip install --progress-bar off --disable-pip-version-check --group tools
	@touch $(TOOLS_STAMP)

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
	$(TOOLS)/cfn-lint template.yaml
	$(TOOLS)/sam validate --template-file template.yaml --region $(AWS_DEFAULT_REGION)
	$(TOOLS)/sam validate --lint --template-file template.yaml --region $(AWS_DEFAULT_REGION)
	$(MAKE) --no-print-directory sam-build

# The layer's lock: its runtime dependencies only (requirements.in; never the dev extra, so no SAM
# CLI), resolved for the Lambda runtime's Python on any platform, into the requirements.txt that
# sam build installs. Run it after changing requirements.in; tests/unit/test_lock.py checks both.
lock: install
	$(BIN)/uv pip compile layers/jobsched/requirements.in --universal --python-version 3.12 \
	  --custom-compile-command "make lock" -o layers/jobsched/requirements.txt

# The build `sam deploy` deploys: both layers and the five functions, for python3.12 on arm64, on
# any machine with Python 3.11+ and no Docker and no python3.12. Every resource has
# `BuildMethod: makefile`, so sam build runs the Makefile in its CodeUri/ContentUri folder
# (https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/building-layers.html,
# .../building-custom-runtimes.html); the layers' Makefiles have pip fetch the manylinux aarch64
# cp312 wheels of the lock with JOBSCHED_BUILD_PYTHON, whatever Python runs pip
# (https://repost.aws/knowledge-center/lambda-python-package-compatible). Then
# jobsched_tools.build_check checks what was built (every locked version in the layer, the aarch64
# pydantic_core, no other platform's binary, each function's app.py) and fails the target if not:
# it never skips, since `sam deploy` would then deploy a stale or missing build.
sam-build: install
	@rm -rf .aws-sam/build && mkdir -p .aws-sam
	JOBSCHED_BUILD_PYTHON=$(abspath $(BIN))/python SAM_CLI_TELEMETRY=0 $(TOOLS)/sam build --build-dir .aws-sam/build \
	  --cache-dir .aws-sam/cache --region $(AWS_DEFAULT_REGION) >.aws-sam/build.log 2>&1 || \
	  { cat .aws-sam/build.log; echo "sam build: FAILED (log above, in .aws-sam/build.log): do not run sam deploy"; exit 1; }
	$(BIN)/python -m jobsched_tools.build_check .aws-sam/build

# --durations=30: the slowest tests, in every run's log, to size them by (issue 35 item 15: under
# a load average of 6 to 8 a fresh clone's make test took 32 minutes and two tests timed out).
unit: install
	$(BIN)/pytest -n 2 --dist loadfile --durations=30

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
	rm -rf $(VENV) $(TOOLS_VENV) .aws-sam .mypy_cache .ruff_cache
