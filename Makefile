# Two commands on a fresh machine (Python 3.11 + pip): `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ENGRAM := $(VENV)/bin/engram
STAMP  := $(VENV)/.installed

.PHONY: install demo compile test bench bench-quick bench-recall clean

install: $(STAMP)

# torch==2.13.0 goes in first so pip keeps the CPU build instead of pulling CUDA wheels.
$(STAMP): pyproject.toml tests/mermaid/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	@# the distribution was called engram-vault before (a name taken on PyPI): drop a stale install of it
	-@$(PY) -m pip uninstall --quiet --yes engram-vault 2>/dev/null
	$(PY) -m pip install --quiet -e '.[test]'
	@# the tests parse every Mermaid chart with the mermaid npm package (tests/docs/test_mermaid.py)
	@command -v npm >/dev/null || { echo "make: Node.js 20+ and npm are needed for the tests (Mermaid charts)"; exit 1; }
	cd tests/mermaid && npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

demo: install
	$(ENGRAM) memory import --vault vault-example vault-example/agent-memories.jsonl
	$(ENGRAM) compile vault-example
	$(ENGRAM) search --vault vault-example "incident runbook" -n 3
	$(ENGRAM) query --vault vault-example "how do we deploy the payments service?" -n 3
	$(ENGRAM) recall --vault vault-example --no-reinforce "how do we roll back a deploy?" -n 3

compile: install
	$(ENGRAM) compile vault-example

test: install
	$(PY) -m pytest -q

# One table of every figure (and benchmarks/results.json); bench-quick: small sizes, for development.
bench: install
	$(PY) benchmarks/table.py

bench-quick: install
	$(PY) benchmarks/table.py --quick

bench-recall: install
	$(PY) benchmarks/locomo.py --data ../shared/data/locomo-dev.json

clean:
	rm -rf $(VENV) vault-example/.engram/cache
