"""Definitions (functions, methods, classes) with qualified names and LSP ranges.

Python: tree-sitter when the file parses cleanly; when it does not (mid-edit), tree-sitter's error
recovery tends to swallow the definitions after the break into one ERROR node, so an
indentation-based line scanner takes over — it recognises every ``def``/``class`` header line
whatever the state of the code around it. Other languages with an installed grammar: functions,
methods, classes/structs/traits/interfaces from tree-sitter queries (a bonus; kinds map onto
"class" | "function" | "method").

Record ``code`` ties (``path::Qualified.symbol``) map onto these through :func:`find_definition`,
and docs/spec.md §3.6 "Ties first" matching goes through :func:`encloses` / :func:`related`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .languages import compiled_query
from .positions import LineIndex, Range

Kind = Literal["class", "function", "method"]


@dataclass(frozen=True)
class Definition:
    """A definition. ``range`` covers decorators through the end of the body; ``name_range`` the
    name. Both are 0-based ((line, character), (line, character)), characters in UTF-16 units."""

    name: str
    qualname: str
    kind: Kind
    range: Range
    name_range: Range
    # code-point offsets of ``range`` into the source (internal; not part of equality)
    offsets: tuple[int, int] = field(default=(0, 0), compare=False, repr=False)

    def contains(self, position: tuple[int, int]) -> bool:
        """Whether an LSP position lies within ``range`` (end inclusive: a cursor just after the
        last character still belongs to it)."""
        return self.range[0] <= tuple(position) <= self.range[1]


def _qual(symbol: "str | Definition") -> str:
    return symbol.qualname if isinstance(symbol, Definition) else str(symbol).strip().strip(".")


def encloses(outer: "str | Definition", inner: "str | Definition") -> bool:
    """``outer`` is ``inner`` or a definition containing it, by qualified name:
    ``encloses("Attention", "Attention.forward")`` is True, the reverse is False."""
    o, i = _qual(outer), _qual(inner)
    return bool(o) and (i == o or i.startswith(o + "."))


def related(a: "str | Definition", b: "str | Definition") -> bool:
    """spec §3.6 "Ties first": a tie to ``a`` points at scope ``b`` when either encloses the other
    (``Class`` ~ ``Class.method``, and vice versa)."""
    return encloses(a, b) or encloses(b, a)


def find_definition(defs: list[Definition], qualname: str) -> Definition | None:
    """The definition a tie's symbol names: exact qualname first; else the first whose qualname
    ends with ``.symbol`` (a tie written ``forward`` or ``Block.forward`` against
    ``Model.Block.forward``); else None."""
    q = _qual(qualname)
    if not q:
        return None
    for d in defs:
        if d.qualname == q:
            return d
    suffix = "." + q
    for d in defs:
        if d.qualname.endswith(suffix):
            return d
    return None


def innermost(defs: list[Definition], position: tuple[int, int]) -> Definition | None:
    """The innermost definition whose range contains ``position`` (the last-starting one)."""
    best = None
    for d in defs:
        if d.contains(position) and (best is None or d.range[0] >= best.range[0]):
            best = d
    return best


# ------------------------------------------------------------------------------------------------
# tree-sitter extraction

_PATTERNS: dict[str, list[str]] = {
    "python": [
        "(function_definition name: (identifier) @name) @def",
        "(class_definition name: (identifier) @name) @def",
    ],
    "cpp": [
        "(function_definition declarator: (function_declarator declarator: (_) @name)) @def",
        "(function_definition declarator: (_ declarator: (function_declarator declarator: (_) @name))) @def",
        "(class_specifier name: (_) @name body: (_)) @def",
        "(struct_specifier name: (_) @name body: (_)) @def",
    ],
    "rust": [
        "(function_item name: (identifier) @name) @def",
        "(function_signature_item name: (identifier) @name) @def",
        "(struct_item name: (_) @name) @def",
        "(enum_item name: (_) @name) @def",
        "(trait_item name: (_) @name) @def",
        "(union_item name: (_) @name) @def",
    ],
    "go": [
        "(function_declaration name: (identifier) @name) @def",
        "(method_declaration name: (field_identifier) @name) @def",
        "(type_spec name: (type_identifier) @name) @def",
    ],
    "javascript": [
        "(function_declaration name: (_) @name) @def",
        "(generator_function_declaration name: (_) @name) @def",
        "(class_declaration name: (_) @name) @def",
        "(method_definition name: (_) @name) @def",
        "(variable_declarator name: (identifier) @name value: (arrow_function)) @def",
        "(variable_declarator name: (identifier) @name value: (function_expression)) @def",
        "(interface_declaration name: (_) @name) @def",
        "(abstract_class_declaration name: (_) @name) @def",
    ],
    "julia": [
        "(function_definition (signature (call_expression . (identifier) @name))) @def",
        "(function_definition (signature (typed_expression . (call_expression . (identifier) @name)))) @def",
        "(struct_definition (type_head (identifier) @name)) @def",
        "(struct_definition (type_head (binary_expression . (identifier) @name))) @def",
        "(assignment . (call_expression . (identifier) @name)) @def",
    ],
    "bash": ["(function_definition name: (word) @name) @def"],
}
_PATTERNS["typescript"] = _PATTERNS["tsx"] = _PATTERNS["javascript"]

_CLASS_TYPES = {
    "class_definition", "class_specifier", "struct_specifier", "struct_item", "enum_item",
    "trait_item", "union_item", "type_spec", "class_declaration", "interface_declaration",
    "abstract_class_declaration", "struct_definition", "class",
}
_FUNCTION_TYPES = {
    "function_definition", "function_item", "function_signature_item", "function_declaration",
    "method_declaration", "generator_function_declaration", "method_definition",
    "variable_declarator", "assignment",
}
# containers whose name becomes part of a member's qualname, and the field holding that name
_CONTAINERS = {
    "class_definition": "name", "class_specifier": "name", "struct_specifier": "name",
    "impl_item": "type", "trait_item": "name", "class_declaration": "name", "class": "name",
    "abstract_class_declaration": "name", "interface_declaration": "name",
}
def _clean_name(text: str) -> str:
    m = re.match(r"~?[\w$]+", text.split("::")[-1].strip())
    return m.group(0) if m else text.strip()


def _container_name(node, field_name: str) -> str:
    n = node.child_by_field_name(field_name)
    if n is None:
        return ""
    return _clean_name(n.text.decode("utf-8", "replace"))


def ts_definitions(lang: str, language, root, index: LineIndex) -> list[Definition]:
    """Definitions from a tree-sitter tree (matches of the language's definition patterns)."""
    q = compiled_query("definitions", lang, language, _PATTERNS)
    if q is None:
        return []
    from tree_sitter import QueryCursor

    if lang == "python":
        return _python_ts_definitions(QueryCursor(q).matches(root), index)
    out: list[Definition] = []
    seen: set[int] = set()
    for _, caps in QueryCursor(q).matches(root):
        node, name_node = caps["def"][0], caps["name"][0]
        if node.start_byte in seen:
            continue
        seen.add(node.start_byte)
        raw = name_node.text.decode("utf-8", "replace")
        name = _clean_name(raw)
        if not name:
            continue
        prefix = [p for p in raw.split("::")[:-1] if p.strip()] if "::" in raw else []
        chain, is_method = [], bool(prefix)
        parent = node.parent
        nearest = None
        while parent is not None:
            t = parent.type
            if t in _CONTAINERS:
                cname = _container_name(parent, _CONTAINERS[t])
                if cname:
                    chain.append(cname)
                if nearest is None:
                    nearest = "class"
            elif t in _FUNCTION_TYPES and t not in ("variable_declarator", "assignment"):
                n = parent.child_by_field_name("name")
                if n is not None:
                    chain.append(_clean_name(n.text.decode("utf-8", "replace")))
                if nearest is None:
                    nearest = "function"
            parent = parent.parent
        if node.type == "method_declaration":  # Go: func (r *Recv) Name()
            recv = node.child_by_field_name("receiver")
            m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*\)\s*$", recv.text.decode() if recv else "")
            if m:
                chain.insert(0, m.group(1))
                is_method = True
        if node.type in _CLASS_TYPES:
            kind: Kind = "class"
        elif is_method or nearest == "class" or node.type == "method_definition":
            kind = "method"
        else:
            kind = "function"
        qual = ".".join([*reversed(chain), *[_clean_name(p) for p in prefix], name])
        outer = node
        if node.parent is not None and node.parent.type == "decorated_definition":
            outer = node.parent
        elif node.type == "variable_declarator" and node.parent is not None:
            outer = node.parent  # `const f = () => …` — the whole declaration
        start = index.byte_offset(outer.start_byte)
        end = index.byte_offset(outer.end_byte)
        ns = index.byte_offset(name_node.start_byte)
        ne = index.byte_offset(name_node.end_byte)
        if "::" in raw:  # cpp Foo::bar — the name range is just `bar`
            ns = ne - len(name)
        out.append(Definition(name, qual, kind, (index.position(start), index.position(end)),
                              (index.position(ns), index.position(ne)), (start, end)))
    out.sort(key=lambda d: (d.offsets[0], -d.offsets[1]))
    return out


def _python_ts_definitions(matches, index: LineIndex) -> list[Definition]:
    """Python: nesting from byte ranges (a stack), not by walking parents — this runs on every
    keystroke's document version, and 2,000-line files have hundreds of definitions."""
    items = []
    for _, caps in matches:
        node, name_node = caps["def"][0], caps["name"][0]
        parent = node.parent
        outer = parent if parent is not None and parent.type == "decorated_definition" else node
        items.append((outer.start_byte, -outer.end_byte, node.type == "class_definition",
                      name_node.start_byte, name_node.end_byte,
                      name_node.text.decode("utf-8", "replace")))
    items.sort()
    out: list[Definition] = []
    stack: list[tuple[int, Definition]] = []  # (end byte, definition)
    pos, off = index.position, index.byte_offset
    for start_b, neg_end, is_class, ns_b, ne_b, name in items:
        end_b = -neg_end
        while stack and stack[-1][0] < end_b:
            stack.pop()
        parent_def = stack[-1][1] if stack else None
        kind: Kind = "class" if is_class else (
            "method" if parent_def is not None and parent_def.kind == "class" else "function")
        qual = f"{parent_def.qualname}.{name}" if parent_def is not None else name
        start, end, ns, ne = off(start_b), off(end_b), off(ns_b), off(ne_b)
        d = Definition(name, qual, kind, (pos(start), pos(end)), (pos(ns), pos(ne)), (start, end))
        out.append(d)
        stack.append((end_b, d))
    return out


# ------------------------------------------------------------------------------------------------
# Python line scanner for code that does not parse

_HEADER = re.compile(r"([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+([^\W\d]\w*)")
_LEX = re.compile(r"""[rRbBuUfF]{0,2}(\"\"\"|'''|"|')|#|[(\[{]|[)\]}]|\\$""")
_SQ = {'"': re.compile(r'(?:[^"\\]|\\.)*"'), "'": re.compile(r"(?:[^'\\]|\\.)*'")}
_TQ = {'"""': re.compile(r'(?:[^\\]|\\.)*?"""', re.S), "'''": re.compile(r"(?:[^\\]|\\.)*?'''", re.S)}


def _ends_with_backslash(line: str) -> bool:
    stripped = line.rstrip("\r")
    return (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1


def scan_python_definitions(index: LineIndex) -> list[Definition]:
    """Python definitions by indentation, tolerant of anything between the headers."""
    lines = index.lines
    starts: list[tuple[int, int]] = []  # (line, indent) of logical statement starts
    headers: dict[int, tuple[str, str, int]] = {}  # line → (keyword, name, name column)
    triple: str | None = None
    depth = 0
    continued = False
    for i, line in enumerate(lines):
        pos = 0
        if triple is not None:  # inside a string opened on an earlier line
            m = (_TQ if len(triple) == 3 else _SQ)[triple].match(line)
            if not m:
                if len(triple) == 1 and not _ends_with_backslash(line):
                    triple = None  # an unterminated one-line string ends here
                continue
            triple, pos = None, m.end()
            continued = depth > 0
        else:
            h = _HEADER.match(line)
            if h:  # a header always starts a statement: unbalanced brackets above are forgotten
                depth, continued = 0, False
                headers[i] = (h.group(2), h.group(3), h.start(3))
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and depth == 0 and not continued:
                starts.append((i, len(line) - len(line.lstrip(" \t"))))
        continued = False
        while True:
            m = _LEX.search(line, pos)
            if not m:
                break
            tok = m.group(0)
            if m.group(1):
                q = m.group(1)
                if len(q) == 3:
                    e = _TQ[q].match(line, m.end())
                    if not e:
                        triple = q
                        break
                    pos = e.end()
                else:
                    e = _SQ[q].match(line, m.end())
                    if not e:
                        if _ends_with_backslash(line):
                            triple = q  # "…\ continues the string on the next line
                        break
                    pos = e.end()
                continue
            if tok == "#":
                break
            if tok == "\\":
                continued = True
                break
            depth = depth + 1 if tok in "([{" else max(0, depth - 1)
            pos = m.end()
        if depth > 0:
            continued = True

    out: list[Definition] = []
    stack: list[tuple[int, int, Definition]] = []  # (indent, end line, definition)
    for k, (line_no, indent) in enumerate(starts):
        if line_no not in headers:
            continue
        keyword, name, col = headers[line_no]
        end_line = line_no
        j = k + 1
        while j < len(starts) and starts[j][1] > indent:
            end_line = starts[j][0]
            j += 1
        # extend over continuation lines of the last statement (up to the next statement start)
        limit = starts[j][0] if j < len(starts) else len(lines)
        for c in range(end_line + 1, limit):
            text = lines[c].lstrip(" \t")
            if not text.strip():
                continue
            if text.startswith("#") and len(lines[c]) - len(text) <= indent:
                break  # a comment at the header's level belongs to what follows
            end_line = c
        first = line_no
        b = k - 1
        while b >= 0 and starts[b][1] == indent and lines[starts[b][0]].lstrip().startswith("@"):
            first = starts[b][0]
            b -= 1
        while stack and (stack[-1][0] >= indent or stack[-1][1] < line_no):
            stack.pop()
        parent = stack[-1][2] if stack else None
        kind: Kind = "class" if keyword == "class" else (
            "method" if parent is not None and parent.kind == "class" else "function")
        qual = f"{parent.qualname}.{name}" if parent else name
        start = index.starts[first] + indent
        end = index.starts[end_line] + len(lines[end_line].rstrip())
        ns = index.starts[line_no] + col
        d = Definition(name, qual, kind, (index.position(start), index.position(end)),
                       (index.position(ns), index.position(ns + len(name))), (start, end))
        out.append(d)
        stack.append((indent, end_line, d))
    return out
