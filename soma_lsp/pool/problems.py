"""A problem found while loading a pool: where it is, what is wrong, and how bad (SPEC 1.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

#: Kinds of problem, for summaries (`soma-lsp check`) and diagnostics codes.
KINDS = ("json", "yaml", "utf-8", "validation", "status", "duplicate", "too-large", "too-deep",
         "alias-bomb", "unreadable", "vanished", "symlink", "not-records",
         "tracker")  # a tracker store that cannot be read now, or one of its runs skipped (pool.trackers)


@dataclass(frozen=True, slots=True)
class Problem:
    """`path:LINE: field.path: message`, with `line` 0-based here and 1-based when printed."""

    path: str
    line: int
    field: str
    message: str
    severity: Severity = "error"
    kind: str = "validation"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line + 1}: "
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"
