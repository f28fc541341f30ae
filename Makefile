# Two commands do all the set-up: `make demo` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install editors-setup vsix bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/soma-lsp demo

# code-server, Chromium and the packaged extension for the VS Code end-to-end test (cached in .cache/).
editors-setup:
	sh editors/vscode/scripts/setup-e2e.sh

test: $(STAMP) editors-setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

vsix:
	cd editors/vscode && npm ci --no-audit --no-fund && npm run package

bench: $(STAMP)
	$(BIN)/python bench/rank.py
	$(BIN)/python bench/pool.py
	$(BIN)/python bench/lsp.py
	$(BIN)/python bench/quality.py

clean:
	rm -rf $(VENV) editors/vscode/node_modules .cache
