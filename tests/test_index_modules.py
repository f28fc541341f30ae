"""The live index in rooms: each module of `soma_lsp.retrieval.index` imports on its own, says why it
exists and stays small; the pool reaches retrieval and records through their public names only."""

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import soma_lsp
from soma_lsp.retrieval import index

MODULES = ["approximate", "columns", "contributions", "exact", "few", "kept", "live", "planes", "pruned", "ranking", "resolved",
           "segments", "state", "tuning"]
ROOT = Path(soma_lsp.__file__).parent


def test_the_index_package_holds_these_modules():
    assert sorted(m.name for m in pkgutil.iter_modules(index.__path__)) == MODULES


@pytest.mark.parametrize("name", MODULES)
def test_each_module_imports_says_why_and_stays_small(name):
    module = importlib.import_module(f"soma_lsp.retrieval.index.{name}")
    assert module.__doc__ and len(module.__doc__.split()) > 10
    assert len(Path(module.__file__).read_text().splitlines()) <= 400


def test_the_public_names_of_retrieval_still_import():
    from soma_lsp.retrieval import CountedLines, Counts, IndexState, LiveIndex, count_lines  # noqa: F401
    from soma_lsp.retrieval.index import IndexState as state, LiveIndex as live, document_fields  # noqa: F401

    assert live is LiveIndex and state is IndexState


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) of each `from … import …` in this file of `soma_lsp`."""
    package = ".".join(("soma_lsp", *path.relative_to(ROOT).parent.parts)).split(".")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.append((module, [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("path", sorted([*ROOT.joinpath("pool").glob("*.py"), ROOT / "stored.py"]),
                         ids=lambda p: p.name)
def test_the_pool_imports_only_public_names_of_retrieval_and_records(path):
    for module, names in _imports(path):
        if module.startswith(("soma_lsp.retrieval", "soma_lsp.records")):
            assert module in ("soma_lsp.retrieval", "soma_lsp.records"), f"{path.name} reaches into {module}"
            assert not [n for n in names if n.startswith("_")], f"{path.name} imports private {names} of {module}"
