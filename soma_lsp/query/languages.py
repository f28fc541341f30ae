"""File extension → language, and lazily loaded tree-sitter grammars.

Only ``tree-sitter-python`` is a hard dependency; the other grammars (the ``languages`` extra) are
used when installed and silently skipped otherwise — those files then fall back to plain regex
identifier extraction. ``tree-sitter-language-pack`` is deliberately not used: it downloads
grammars at run time, and a language server must not fetch code while it runs.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass

CONFIG_LANGUAGES = frozenset({"yaml", "json", "toml"})

_EXTENSIONS = {
    "py": "python", "pyi": "python", "pyw": "python",
    "c": "cpp", "h": "cpp", "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "c++": "cpp", "hpp": "cpp",
    "hh": "cpp", "hxx": "cpp", "h++": "cpp", "ipp": "cpp", "inl": "cpp", "cu": "cpp", "cuh": "cpp",
    "rs": "rust", "go": "go",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "jl": "julia", "sh": "bash", "bash": "bash", "zsh": "bash", "ksh": "bash",
    "yaml": "yaml", "yml": "yaml", "json": "json", "jsonc": "json", "toml": "toml",
}

# language → (module, function returning the grammar pointer)
_GRAMMARS = {
    "python": ("tree_sitter_python", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "go": ("tree_sitter_go", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "julia": ("tree_sitter_julia", "language"),
    "bash": ("tree_sitter_bash", "language"),
}

_SHEBANGS = (("python", "python"), ("bash", "bash"), ("/sh", "bash"), ("zsh", "bash"),
             ("node", "javascript"), ("julia", "julia"))


def language_for_path(path: str, source: str | None = None) -> str:
    """Language name for a path (or ``file://`` URI): by extension, case-insensitively, else by a
    ``#!`` line when ``source`` is given, else ``"text"`` (regex identifiers only)."""
    name = path.replace("\\", "/").split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]
    if "." in name:
        lang = _EXTENSIONS.get(name.rsplit(".", 1)[1].lower())
        if lang:
            return lang
    if source and source.startswith("#!"):
        first = source.split("\n", 1)[0]
        for needle, lang in _SHEBANGS:
            if needle in first:
                return lang
    return "text"


@dataclass(frozen=True)
class Grammar:
    name: str
    language: object  # tree_sitter.Language


_lock = threading.Lock()
_loaded: dict[str, Grammar | None] = {}


def grammar(lang: str) -> Grammar | None:
    """The tree-sitter grammar for ``lang``, or None when it has none or it is not installed."""
    if lang in _loaded:
        return _loaded[lang]
    with _lock:
        if lang not in _loaded:
            _loaded[lang] = _load(lang)
    return _loaded[lang]


def _load(lang: str) -> Grammar | None:
    spec = _GRAMMARS.get(lang)
    if spec is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(spec[0])
        return Grammar(lang, tree_sitter.Language(getattr(module, spec[1])()))
    except Exception:  # not installed, or an ABI mismatch: fall back to regex
        return None


_compiled: dict[tuple[str, str], object] = {}


def compiled_query(kind: str, lang: str, language, patterns: dict[str, list[str]]):
    """The tree-sitter `Query` of the patterns this grammar version accepts (a pattern naming a node
    type the installed grammar lacks is dropped, not fatal), compiled once per (kind, language)."""
    key = (kind, lang)
    if key not in _compiled:
        from tree_sitter import Query

        valid = []
        for pattern in patterns.get(lang, []):
            try:
                Query(language, pattern)
                valid.append(pattern)
            except Exception:  # a node type this grammar version does not have
                pass
        _compiled[key] = Query(language, "\n".join(valid)) if valid else None
    return _compiled[key]
