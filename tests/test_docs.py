"""The docs stay true to the package: every module of `soma_lsp` has its line on a module map — in
docs/architecture.md § Module map, or for the server wing in soma_lsp/server/README.md § Layout —
and every module a map names exists; every setting the server reads is in each settings table
users read (README, spec §4.9, the VS Code extension and its README), and no other."""

from __future__ import annotations

import json
import re
from pathlib import Path

from soma_lsp.server.settings import FIELDS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "soma_lsp"
SERVER = PACKAGE / "server"


def _section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def _named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_][a-z0-9_./]*)`", text))


def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_outside_the_server_is_on_the_architecture_map():
    named = _named(_section(ROOT / "docs" / "architecture.md", "## Module map"))
    missing = []
    for path in _modules(PACKAGE):
        if SERVER in path.parents:
            continue
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts  # a package is named as itself
        if parts and parts[-1] not in named and ".".join(parts) not in named:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not on docs/architecture.md's module map: {missing}"


def test_every_server_module_is_in_the_server_readme():
    named = _named(_section(SERVER / "README.md", "## Layout"))
    missing = [str(p.relative_to(SERVER)) for p in _modules(SERVER)
               if str(p.relative_to(SERVER)) not in named and p.name != "__init__.py"]
    assert not missing, f"not in soma_lsp/server/README.md § Layout: {missing}"


def test_every_module_a_map_names_exists():
    rows = _section(ROOT / "docs" / "architecture.md", "## Module map").split("| module |", 1)[1]
    firsts = re.findall(r"^\| `([a-z_.]+)` \|", rows, flags=re.M)
    assert firsts, "the module map's table was not found"
    for dotted in firsts:
        path = PACKAGE.joinpath(*dotted.split("."))
        assert path.with_suffix(".py").is_file() or path.is_dir(), dotted
    layout = _section(SERVER / "README.md", "## Layout")
    for name in re.findall(r"`((?:features/)?[a-z_]+\.py)`", layout):
        assert (SERVER / name).is_file(), name


def _first_column_names(table_text: str, prefix: str = "") -> set[str]:
    names = set()
    for row in re.findall(r"^\| ([^|]+) \|", table_text, flags=re.M):
        names |= {n[len(prefix):] for n in re.findall(r"`([A-Za-z.]+)`", row) if n.startswith(prefix)}
    return names


def test_every_setting_is_documented_where_users_look_and_none_that_is_not():
    """The server's settings (`server.settings.FIELDS`) against the README's table, spec §4.9's,
    the VS Code extension's contributed settings and its README's table."""
    keys = set(FIELDS)
    readme = _section(ROOT / "README.md", "## Settings (section `soma`)")
    spec = _section(ROOT / "docs" / "spec.md", "### 4.9 Configuration")
    package = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text(encoding="utf-8"))
    groups = package["contributes"]["configuration"]
    contributed = {key[len("soma."):] for group in (groups if isinstance(groups, list) else [groups])
                   for key in group["properties"]}
    client_only = {"server.command", "server.pipe", "server.installSource", "trace.server"}
    vscode_readme = _section(ROOT / "editors" / "vscode" / "README.md", "## Settings")
    assert _first_column_names(readme) == keys
    assert _first_column_names(spec) == keys
    assert contributed - client_only == keys
    assert _first_column_names(vscode_readme, "soma.") - client_only == keys
