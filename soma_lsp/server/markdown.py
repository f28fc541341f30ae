"""Record text is data: make it inert before it goes into Markdown (hover) or plain text (messages).

`escape(text)` is for Markdown. It backslash-escapes a character only where Markdown would read it
as markup, because a client that shows the Markdown source (Neovim 0.11 highlights a hover but
does not conceal escapes) must show `rope-theta-1m-bf16`, `cos/sin` and `lr 6e-4` as written:

* always: `\\`, `` ` ``, `*`, `~`, `|` (code, emphasis, strikethrough, tables) and the second `/`
  of `//` (a protocol-relative link to linkifiers) — rare in record text;
* `_` unless it is inside a word (`rope_theta` stays; `_x`, `__init__` do not: they could be emphasis);
* `[` and `]` where they could make a link, an image or a footnote: `]` before `(`, `[` or `:`;
  `[` before `^` and at the start of the text (a reference definition);
* `<` before a letter, `/`, `!` or `?` (an HTML tag, an autolink); `&` that would spell an entity;
* at the start of the text, what starts a block: `#`, `>`, `-`, `+`, `=`, `1.`/`1)`.

URL-ish text is defanged so that no renderer's autolinker (GFM `www.`/`http://`/e-mail autolinks,
linkify-it in its standard, non-fuzzy mode) can turn it into a link: `http://x` reads `http[:]/\\/x`
in Markdown, `http[:]//x` in plain text, `www.x` reads `www[.]x`, `a@b` reads
`a[@]b`. Line breaks and control characters become spaces, so one field stays on one line.

`plain(text)` is for plain-text surfaces (diagnostic messages, CLI output, symbol names): control
characters removed, whitespace collapsed, same defanging of links.

Neither ever produces a link, an HTML tag or a `command:` URI from record text; the server writes
links only from its own data (a record's file location).
"""

from __future__ import annotations

import re
import unicodedata

MAX_FIELD = 300

_SCHEME = re.compile(
    r"\b([A-Za-z][A-Za-z0-9+.-]{0,31}):(?=//)"
    r"|\b(command|file|javascript|vbscript|data|mailto|vscode(?:-[a-z]+)?|tel|sms|ftp|https?|ssh|git):(?=\S)",
    re.ASCII | re.IGNORECASE)
_WWW = re.compile(r"\b(www)\.", re.IGNORECASE)
_AT = re.compile(r"(?<=\S)@(?=\S)")
_SPACE = re.compile(r"\s+")
_ALWAYS = re.compile(r"[\\`*~|]|(?<=/)/")  # … and the second `/` of `//` (linkify's `//host`)
_OPEN_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # `_` with a non-word neighbour (or none)
_LINKY = re.compile(r"\](?=[(\[:])|\[(?=\^)|^\[")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_BLOCK_START = re.compile(r"^(?:[#>+=-]|\d{1,9}(?=[.)]))")


def _flatten(text: str) -> str:
    """Control and format characters (incl. bidi overrides and zero-width ones) → space; collapse.
    (`isprintable` is false exactly when the text holds such a character, or a separator other than
    the space: most record text holds none, and the loop over its characters was most of a hover's
    Markdown.)"""
    cleaned = text if text.isprintable() else "".join(
        " " if unicodedata.category(c)[0] in ("C", "Z") and c != " " else c for c in text)
    return _SPACE.sub(" ", cleaned).strip()


def defang(text: str) -> str:
    """Break what autolinkers recognise: `scheme:` → `scheme[:]`, `www.` → `www[.]`, `@` → `[@]`."""
    text = _SCHEME.sub(lambda m: f"{m.group(1) or m.group(2)}[:]", text)
    text = _WWW.sub(lambda m: f"{m.group(1)}[.]", text)
    return _AT.sub("[@]", text)


def _truncate(text: str, limit: int | None) -> str:
    if limit is not None and len(text) > limit:
        return text[: limit - 1].rstrip() + "…"
    return text


def flat(text: object, limit: int | None = MAX_FIELD) -> str:
    """One line of text for a client that shows it as text (a command's JSON): control and format
    characters made spaces, at most `limit` characters; not defanged (no Markdown renders it)."""
    return _truncate(_flatten(str(text)), limit)


def plain(text: object, limit: int | None = MAX_FIELD) -> str:
    """One inert line of plain text."""
    return _truncate(defang(_flatten(str(text))), limit)


def escape(text: object, limit: int | None = MAX_FIELD) -> str:
    """One inert line of Markdown that renders as the text itself (defanged), with as few escapes
    as Markdown needs (module docstring)."""
    flat = plain(text, limit)
    marked = set()
    for pattern in (_ALWAYS, _OPEN_UNDERSCORE, _LINKY, _TAG, _ENTITY):
        marked.update(m.start() for m in pattern.finditer(flat))
    block = _BLOCK_START.match(flat)
    if block:
        marked.add(block.end() if block.group(0)[0].isdigit() else 0)  # `1\.` / `\#`
    pieces, start = [], 0
    for at in sorted(marked):  # the text between escapes in slices, not character by character
        pieces += (flat[start:at], "\\")
        start = at
    pieces.append(flat[start:])
    return "".join(pieces)
