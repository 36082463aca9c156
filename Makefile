# The README's quick start is `make demo` and `make test`; both install what they need first.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export AWS_DEFAULT_REGION ?= us-east-1
export AWS_ACCESS_KEY_ID ?= testing
export AWS_SECRET_ACCESS_KEY ?= testing
export POWERTOOLS_TRACE_DISABLED ?= true

.PHONY: install demo test lint typecheck unit template-check chaos soak bench scale-model local clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "error: $(PY) not found (set PY=python3.x, 3.11+)"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

demo: install
	$(BIN)/jobsched demo

local: install
	$(BIN)/jobsched local

test: install lint typecheck template-check unit

lint: install
	$(BIN)/ruff check layers functions tests scripts
	$(BIN)/ruff format --check layers functions tests scripts

typecheck: install
	$(BIN)/mypy

template-check: install
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --template-file template.yaml --region $(AWS_DEFAULT_REGION)
	$(BIN)/sam validate --lint --template-file template.yaml --region $(AWS_DEFAULT_REGION)

unit: install
	$(BIN)/pytest -n 2 --dist loadfile

chaos: install
	$(BIN)/jobsched chaos --seed 1 --jobs 150 --hours 12

soak: install
	$(BIN)/python scripts/soak.py

bench: install
	$(BIN)/jobsched bench

scale-model: install
	$(BIN)/python scripts/scale_model.py

clean:
	rm -rf $(VENV) .aws-sam .mypy_cache .ruff_cache
