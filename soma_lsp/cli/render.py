"""Plain-text and JSON output for the command line.

Record text is data, and a terminal obeys what it prints: every line the CLI prints from record text
or pool paths goes through `terminal_safe` (escape sequences — CSI, OSC, DCS… in their 7- and 8-bit
forms — removed, other C0/C1 and bidi controls removed, line breaks and tabs made spaces, lone
surrogates made U+FFFD), and `--json` escapes C1 and bidi controls as `\\uXXXX` (the data is intact,
the terminal inert; the stdlib already escapes C0) and replaces lone surrogates, which no encoder
can write, with U+FFFD. docs/reliability.md states it.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..retrieval import TERMS, ScoredRecord

_LETTERS = {"lexical": "lex", "structural": "struct", "recency": "recency", "importance": "import"}

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ESCAPE = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI … final byte (colours, cursor, clear screen)
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"  # OSC, DCS, SOS, PM, APC … ST
    "|\x1b[ -/]*[0-~]?")  # any other escape (and a lone ESC)
_SPACING = re.compile("[\t\n\v\f\r]")
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """One line a terminal only displays (module docstring)."""
    text = _SPACING.sub(" ", _ESCAPE.sub("", text))
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def print_safe(text: str, file: TextIO | None = None) -> None:
    """Print text made of record text or paths, each line `terminal_safe`."""
    print("\n".join(terminal_safe(line) for line in text.split("\n")), file=file or sys.stdout)


def dumps_json(value: Any) -> str:
    """Full float precision (Python's shortest round-trip repr), UTF-8 kept, terminal-safe."""
    text = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, indent=2, ensure_ascii=False))
    return _SURROGATE.sub("\ufffd", text)


def _term(scored: ScoredRecord, term: str) -> str:
    value = getattr(scored.components, term)
    if value is None:
        return "—"
    return f"{value:.2f}×{scored.components.weights[term]:.2f}"


def print_table(results: Sequence[ScoredRecord], pool_size: int, sources: Sequence[str] = ()) -> None:
    """One row per result with each term as value×effective weight, then its headline and matches.
    With none, where it looked (`sources`: the pool's entries), so an empty answer is not a mystery."""
    if not results:
        where = ", ".join(terminal_safe(s) for s in sources) or "no pool"
        print(f"No experiments in a pool of {pool_size} (read from {where}).")
        return
    width = shutil.get_terminal_size((100, 20)).columns
    name_width = max(12, min(32, max(len(terminal_safe(r.record.name)) for r in results)))
    header = (f"{'#':>3}  {'score':6}  {'id':10}  {'name':{name_width}}  {'status':12}  "
              + "  ".join(f"{_LETTERS[t]:>9}" for t in TERMS))
    print(header)
    print("─" * min(width, len(header)))
    for position, r in enumerate(results, 1):
        status = r.record.status.value + (" ✗" if r.dead_end else "")
        name = terminal_safe(r.record.name)[:name_width]
        print(f"{position:>3}  {r.score:6.4f}  {terminal_safe(r.record.id):10}  {name:{name_width}}  "
              f"{status:12}  " + "  ".join(f"{_term(r, t):>9}" for t in TERMS))
        details = []
        if r.record.headline:
            details.append(r.record.headline)
        if r.components.matched_terms:
            details.append("matched: " + ", ".join(r.components.matched_terms))
        if r.components.shared_components:
            details.append("shared: " + ", ".join(r.components.shared_components))
        for line in details:
            print(" " * 13 + terminal_safe(line)[: max(20, width - 14)])
    print(f"\n{len(results)} of {pool_size} experiments · columns are value×effective weight · ✗ dead end")
