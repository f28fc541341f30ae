"""Plain-text and JSON output for the command line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from typing import Any

from ..retrieval import TERMS, ScoredRecord

_LETTERS = {"lexical": "lex", "structural": "struct", "recency": "recency", "importance": "import"}


def dumps_json(value: Any) -> str:
    """Full float precision (Python's shortest round-trip repr), UTF-8 kept."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _term(scored: ScoredRecord, term: str) -> str:
    value = getattr(scored.components, term)
    if value is None:
        return "—"
    return f"{value:.2f}×{scored.components.weights[term]:.2f}"


def print_table(results: Sequence[ScoredRecord], pool_size: int) -> None:
    """One row per result with each term as value×effective weight, then its headline and matches."""
    if not results:
        print(f"No experiments in a pool of {pool_size}.")
        return
    width = shutil.get_terminal_size((100, 20)).columns
    name_width = max(12, min(32, max(len(r.record.name) for r in results)))
    header = (f"{'#':>3}  {'score':6}  {'id':10}  {'name':{name_width}}  {'status':12}  "
              + "  ".join(f"{_LETTERS[t]:>9}" for t in TERMS))
    print(header)
    print("─" * min(width, len(header)))
    for position, r in enumerate(results, 1):
        status = r.record.status.value + (" ✗" if r.dead_end else "")
        print(f"{position:>3}  {r.score:6.4f}  {r.record.id:10}  {r.record.name[:name_width]:{name_width}}  "
              f"{status:12}  " + "  ".join(f"{_term(r, t):>9}" for t in TERMS))
        details = []
        if r.record.headline:
            details.append(r.record.headline)
        if r.components.matched_terms:
            details.append("matched: " + ", ".join(r.components.matched_terms))
        if r.components.shared_components:
            details.append("shared: " + ", ".join(r.components.shared_components))
        for line in details:
            print(" " * 13 + line[: max(20, width - 14)])
    print(f"\n{len(results)} of {pool_size} experiments · columns are value×effective weight · ✗ dead end")
