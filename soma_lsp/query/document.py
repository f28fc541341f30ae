"""One parse per (language, source text): everything hover, lens, find and diagnostics need.

A small LRU keyed by the text itself (Python caches a string's hash, so a repeat call with the
same document version costs one dict lookup). Entries keep no tree-sitter tree, only what was
extracted from it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from .architecture import PythonArchitecture, config_bag, too_deep
from .definitions import Definition, scan_python_definitions, ts_definitions
from .languages import CONFIG_LANGUAGES, compiled_query, grammar, language_for_path
from .positions import LineIndex

# capture patterns per language: @comment / @string (masked out of the code) / @doc (docstrings,
# whose words count like comments). Patterns a grammar version lacks are skipped.
_PROSE_PATTERNS = {
    "python": ["(comment) @comment", "(string) @string", "(expression_statement (string) @doc)"],
    "cpp": ["(comment) @comment", "(string_literal) @string", "(raw_string_literal) @string",
            "(char_literal) @string"],
    "rust": ["(line_comment) @comment", "(block_comment) @comment", "(string_literal) @string",
             "(raw_string_literal) @string", "(char_literal) @string"],
    "go": ["(comment) @comment", "(interpreted_string_literal) @string",
           "(raw_string_literal) @string", "(rune_literal) @string"],
    "javascript": ["(comment) @comment", "(string) @string", "(template_string) @string",
                   "(regex) @string"],
    "julia": ["(line_comment) @comment", "(block_comment) @comment", "(string_literal) @string",
              "(command_literal) @string", "(character_literal) @string",
              "(prefixed_string_literal) @string", "(source_file (string_literal) @doc)",
              "(module_definition (string_literal) @doc)"],
    "bash": ["(comment) @comment"],
}
_PROSE_PATTERNS["typescript"] = _PROSE_PATTERNS["tsx"] = _PROSE_PATTERNS["javascript"]
_COMMENT_MARKERS = {
    "python": ("#",), "bash": ("#",), "julia": ("#",), "yaml": ("#",), "toml": ("#",),
    "text": ("#", "//", "--", ";"), "json": (),
}
_C_MARKERS = ("//", "/*", "*")


@dataclass
class ParsedDoc:
    source: str
    lang: str
    index: LineIndex
    masked: str  # source with comments and strings blanked (newlines kept): the code proper
    prose: list[tuple[int, int]]  # code-point spans of comments and docstrings, sorted
    defs: list[Definition]
    statements: list[tuple[int, int]]  # top-level statement spans (Python, clean parse only)
    has_error: bool = False
    has_grammar: bool = False  # False: no tree-sitter grammar (config, unknown, not installed)
    arch: PythonArchitecture | None = None
    calls: list[tuple[int, str]] = field(default_factory=list)  # Python instantiations
    _config_bag: dict[str, float] | None = field(default=None, repr=False)
    #: what the query builder derives from the whole parse, made once per parse (lever `hubs`' terms of
    #: each definition): a parse is shared by every query on the same text (`parse`'s cache)
    memo: dict[str, object] = field(default_factory=dict, repr=False)

    @property
    def comment_markers(self) -> tuple[str, ...]:
        return _COMMENT_MARKERS.get(self.lang, _C_MARKERS)

    def config_bag(self) -> dict[str, float]:
        if self._config_bag is None:
            self._config_bag = config_bag(self.source, self.lang)
        return dict(self._config_bag)


def _mask(source: str, spans: list[tuple[int, int]]) -> str:
    pieces, last = [], 0
    for s, e in spans:
        if s < last:
            continue
        pieces.append(source[last:s])
        pieces.append("".join("\n" if c == "\n" else " " for c in source[s:e])
                      if "\n" in source[s:e] else " " * (e - s))
        last = e
    pieces.append(source[last:])
    return "".join(pieces)


def _build(source: str, lang: str) -> ParsedDoc:
    index = LineIndex(source)
    deep = too_deep(source)
    g = None if deep else grammar(lang)
    if g is None:
        if lang == "python":  # still find definitions and instantiations, without a tree
            doc = ParsedDoc(source, lang, index, source, [], scan_python_definitions(index), [])
            doc.arch = PythonArchitecture(source)
            doc.calls = doc.arch.calls(source)
            doc.has_grammar = True
            return doc
        doc = ParsedDoc(source, lang, index, source, [], [], [])
        if deep and lang in CONFIG_LANGUAGES:
            doc._config_bag = {}
        return doc
    from tree_sitter import Parser, QueryCursor

    tree = Parser(g.language).parse(source.encode("utf-8", "surrogatepass"))
    root = tree.root_node
    has_error = root.has_error
    masked_spans: list[tuple[int, int]] = []
    prose: list[tuple[int, int]] = []
    q = compiled_query("prose", lang, g.language, _PROSE_PATTERNS)
    if q is not None:
        caps = QueryCursor(q).captures(root)
        off = index.byte_offset
        for name in ("comment", "string", "doc"):
            for n in caps.get(name, ()):
                if name == "string" and n.has_error:
                    continue  # an unclosed string: its words stay visible as code
                span = (off(n.start_byte), off(n.end_byte))
                if name != "doc":
                    masked_spans.append(span)
                if name != "string":
                    prose.append(span)
    masked_spans.sort()
    prose = sorted(set(prose))
    masked = _mask(source, masked_spans)
    statements: list[tuple[int, int]] = []
    if lang == "python" and has_error:
        defs = scan_python_definitions(index)
    else:
        defs = ts_definitions(lang, g.language, root, index)
    if lang == "python" and not has_error:
        off = index.byte_offset
        statements = [(off(c.start_byte), off(c.end_byte)) for c in root.named_children]
    doc = ParsedDoc(source, lang, index, masked, prose, defs, statements, has_error, True)
    if lang == "python":
        doc.arch = PythonArchitecture(masked)
        doc.calls = doc.arch.calls(masked)
    return doc


_CACHE_SIZE = 16  # documents (a few open editors, a few versions each)
_CACHE_CHARS = 8_000_000  # and at most this much text, whatever the count
_cache: OrderedDict[tuple[str, str], ParsedDoc] = OrderedDict()
_cache_lock = threading.Lock()


def parse(source: str, path: str) -> ParsedDoc:
    """The (cached) parse of ``source`` as the language of ``path``."""
    lang = language_for_path(path, source)
    key = (lang, source)
    with _cache_lock:
        doc = _cache.get(key)
        if doc is not None:
            _cache.move_to_end(key)
            return doc
    doc = _build(source, lang)
    with _cache_lock:
        _cache[key] = doc
        while len(_cache) > 1 and (len(_cache) > _CACHE_SIZE
                                   or sum(len(k[1]) for k in _cache) > _CACHE_CHARS):
            _cache.popitem(last=False)
    return doc


__all__ = ["ParsedDoc", "parse", "CONFIG_LANGUAGES"]
