# Two commands on a fresh machine (Python 3.11 + pip): `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ENGRAM := $(VENV)/bin/engram
STAMP  := $(VENV)/.installed
EXAMPLE_TMP := $(CURDIR)/.venv/example-chunk

.PHONY: install demo compile example-chunk example-wiki test bench bench-quick bench-recall bench-longmemeval clean

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
	@# installed beside the venv, not in tests/: third-party JavaScript stays out of the project's tests
	mkdir -p $(VENV)/mermaid && cp tests/mermaid/package.json tests/mermaid/package-lock.json tests/mermaid/parse.mjs $(VENV)/mermaid/
	cd $(VENV)/mermaid && npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

# The demo's memories travel as a committed chunk (vault-example/.engram/chunks/), as in any synced
# vault: compiling a fresh clone reproduces every committed page, and running the demo twice changes nothing.
demo: install
	$(ENGRAM) compile vault-example
	$(ENGRAM) search --vault vault-example "incident runbook" -n 3
	$(ENGRAM) query --vault vault-example "how do we deploy the payments service?" -n 3
	$(ENGRAM) recall --vault vault-example --no-reinforce "how do we roll back a deploy?" -n 3

compile: install
	$(ENGRAM) compile vault-example

# Rebuild the demo's chunk from agent-memories.jsonl (after editing that file), in a scratch copy
# whose journal is thrown away: the chunk is the memories' only committed source.
example-chunk: install
	rm -rf $(EXAMPLE_TMP) && mkdir -p $(EXAMPLE_TMP) && cp -r vault-example/engram.toml vault-example/agent-memories.jsonl $(EXAMPLE_TMP)/
	$(ENGRAM) memory import --vault $(EXAMPLE_TMP) $(EXAMPLE_TMP)/agent-memories.jsonl
	$(ENGRAM) sync export --vault $(EXAMPLE_TMP) --created-by vault-example
	rm -rf vault-example/.engram/chunks vault-example/.engram/manifest.json
	cp -r $(EXAMPLE_TMP)/.engram/chunks $(EXAMPLE_TMP)/.engram/manifest.json vault-example/.engram/
	$(ENGRAM) compile vault-example

# Rebuild the demo's wiki (raw/, wiki/ and its history) from examples/wiki-sources/ through the
# same commands an agent's tools run, then compile: its pages are committed like the others.
example-wiki: install
	examples/build-example-wiki.sh $(ENGRAM) vault-example
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

bench-longmemeval: install  # hours on a busy machine: ~60 CPU seconds a question to store
	$(PY) benchmarks/longmemeval.py --data ../shared/data/longmemeval-dev.json

clean:
	rm -rf $(VENV) vault-example/.engram/cache
