"""The import graph of soma_lsp keeps its layers: no cycle, nothing imported from a higher layer, and
inside the server only `app` imports the features (which never import each other).

Every `import`/`from … import` in every module counts — at module level, inside functions and
under `TYPE_CHECKING` alike: an import deferred into a function still ties the two modules together.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "soma_lsp"

#: Lower layers never import higher ones. Every module must be placed (a new top-level module is a
#: decision to make here, not a default).
LAYERS = {
    "soma_lsp": 0, "soma_lsp.records": 0, "soma_lsp.results": 0, "soma_lsp.retrieval": 0,
    "soma_lsp.stored": 0, "soma_lsp.gcpause": 0, "soma_lsp.foreground": 0,
    "soma_lsp.query": 1, "soma_lsp.pool": 1,
    "soma_lsp.server": 2, "soma_lsp.client": 2,
    "soma_lsp.cli": 3, "soma_lsp.__main__": 3,
}
FEATURES = "soma_lsp.server.features"
WIRING = "soma_lsp.server.app"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The soma_lsp modules `name` imports (a `from package import module` names the module)."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names} & known
            # `from . import convert` needs the module; `from .x import name` needs x itself
            out.update(submodules if submodules and len(submodules) == len(node.names) else {target} | submodules)
    return {m for m in out if m in known and m != name}


@lru_cache(maxsize=1)
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_the_walker_sees_function_level_and_relative_imports():
    graph = _graph()
    assert "soma_lsp.client" in graph["soma_lsp.cli.demo"]  # imported inside a function
    assert "soma_lsp.server.session" in graph["soma_lsp.server.features.hover"]  # `from ..session import`
    assert "soma_lsp.server.convert" in graph["soma_lsp.server.session"]  # `from . import convert`


def test_every_module_has_a_layer():
    unplaced = [m for m in _modules() if not any(m == p or m.startswith(p + ".") for p in LAYERS)]
    assert unplaced == []


def test_no_import_goes_up_a_layer():
    upward = sorted((a, b) for a, targets in _graph().items() for b in targets if _layer(b) > _layer(a))
    assert upward == []


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m.startswith("soma_lsp.server")))
def test_only_app_imports_the_features(module):
    """The session, pool service, protocol and transport (and every shared server module) know no
    feature; a feature knows no other feature; only `app` wires them."""
    features = {m for m in _graph()[module] if m.startswith(FEATURES + ".")}
    if module == WIRING:
        assert features, "app registers the features"
    else:
        assert features == set()
    if module not in (WIRING, "soma_lsp.server"):
        assert WIRING not in _graph()[module]
