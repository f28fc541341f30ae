"""Record text is data: make it inert before it goes into Markdown (hover) or plain text (messages).

`escape(text)` is for Markdown. Every ASCII punctuation character is backslash-escaped (CommonMark
allows escaping any of them, so nothing in record text can open emphasis, code, a link, an image,
a heading, a list, a table or raw HTML), `&`, `<` and `>` become entities, and URL-ish text is
defanged so that no renderer's autolinker (GFM `www.`/`http://`/e-mail autolinks, linkify) can turn
it into a link: `http://x` reads `http[:]//x`, `www.x` reads `www[.]x`, `a@b` reads `a[@]b`.
Line breaks and control characters become spaces, so one field stays on one line.

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
_PUNCTUATION = set("\\`*_{}[]()#+-.!|~:;\"'=^$%,/?@")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _flatten(text: str) -> str:
    """Control and format characters (incl. bidi overrides and zero-width ones) → space; collapse."""
    cleaned = "".join(" " if unicodedata.category(c)[0] in ("C", "Z") and c != " " else c for c in text)
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


def plain(text: object, limit: int | None = MAX_FIELD) -> str:
    """One inert line of plain text."""
    return _truncate(defang(_flatten(str(text))), limit)


def escape(text: object, limit: int | None = MAX_FIELD) -> str:
    """One inert line of Markdown that renders as the text itself (defanged)."""
    flat = plain(text, limit)
    out = []
    for char in flat:
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif char in _PUNCTUATION:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
