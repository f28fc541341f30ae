# Two commands do all the set-up: `make demo` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/soma-lsp demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) editors/vscode/node_modules .cache
