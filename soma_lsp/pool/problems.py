"""A problem found while loading a pool: where it is, what is wrong, and how bad (docs/spec.md §1.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

#: Kinds of problem, for summaries (`soma-lsp check`) and diagnostics codes.
KINDS = ("json", "yaml", "utf-8", "validation", "status", "duplicate", "too-large", "too-deep",
         "alias-bomb", "unreadable", "vanished", "symlink", "not-records", "more",
         "tracker")  # a tracker store that cannot be read now, or one of its runs skipped (pool.trackers)

#: Problems kept per file (docs/reliability.md): a file of five million bad elements must not cost
#: gigabytes in `check` and the server, nor diagnostics no editor can show. The rest are counted.
MAX_PER_FILE = 100


@dataclass(frozen=True, slots=True)
class Problem:
    """`path:LINE[:COLUMN]: field.path: message`, with `line` and `column` 0-based here and 1-based
    when printed; `column` where the format gives it (the bad field's key), else None."""

    path: str
    line: int
    field: str
    message: str
    severity: Severity = "error"
    kind: str = "validation"
    column: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line + 1}:" + (f"{self.column + 1}: " if self.column is not None else " ")
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"


class _NoProblems(list):
    """The problems of a load that has none: one list shared by all of them (an empty list each was
    56 bytes a file, issue 22 point 2), which refuses to grow, so that sharing it is safe."""

    __slots__ = ()

    def _refuse(self, *_: object) -> None:
        raise TypeError("NO_PROBLEMS is shared by every load without problems; give a load a list of its own")

    append = extend = insert = __setitem__ = __iadd__ = _refuse


NO_PROBLEMS: list[Problem] = _NoProblems()


class FileProblems(list):
    """A file's problems as they are found: the first `MAX_PER_FILE` kept, the others only counted."""

    __slots__ = ("more", "worst")

    def __init__(self) -> None:
        super().__init__()
        self.more = 0
        self.worst: Severity = "warning"

    def append(self, problem: Problem) -> None:
        if len(self) < MAX_PER_FILE:
            super().append(problem)
        else:
            self.more += 1
            if problem.severity == "error":
                self.worst = "error"

    def done(self, path: str) -> list[Problem]:
        """The kept problems, then one that says how many more there were (if any)."""
        if not self:
            return NO_PROBLEMS
        return list(self) + ([more_problems(path, self.more, self.worst, self[-1].line)] if self.more else [])


def more_problems(path: str, count: int, severity: Severity, line: int) -> Problem:
    """Stands for `count` problems not kept; placed at `line`, after the last one kept."""
    return Problem(path, line, "", f"and {count} more problems in this file, not listed (at most "
                                f"{MAX_PER_FILE} are kept per file)", severity, "more")
