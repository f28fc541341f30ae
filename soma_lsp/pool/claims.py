"""Where each record id occurs in the pool: its claims, `(path, ordinal)` in path order.

Almost every id occurs once, so one claim is held without a list: the bare path when it is the file's
first record (a single-record file, a tracker run), else the `(path, ordinal)` pair; only an id that
occurs more than once (a duplicate) has a sorted list. At 100k single-record files that is one dict
entry an id instead of a list and a tuple as well (≈ 180 → 40 bytes an id, issue 22 point 2). The
held values are plain (str, tuple, list) so that a snapshot keeps them as they are (`pool.snapshot`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

Claim = tuple[str, int]
Held = str | Claim | list[Claim]


class Claims:
    """id → its claims. `held` is the packed dict (as a snapshot stores it), taken as it is."""

    __slots__ = ("held",)

    def __init__(self, held: dict[str, Held] | None = None) -> None:
        self.held: dict[str, Held] = {} if held is None else held

    def __len__(self) -> int:
        return len(self.held)

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def add(self, record_id: str, path: str, ordinal: int) -> None:
        held = self.held.get(record_id)
        if held is None:
            self.held[record_id] = path if ordinal == 0 else (path, ordinal)
        elif type(held) is list:
            bisect.insort(held, (path, ordinal))
        else:
            self.held[record_id] = sorted([_unpacked(held), (path, ordinal)])

    def remove(self, record_id: str, path: str, ordinal: int) -> None:
        """Drop one claim the id has (a KeyError or ValueError if it has not)."""
        held = self.held[record_id]
        if type(held) is list:
            held.remove((path, ordinal))
            if len(held) == 1:
                self.held[record_id] = _packed(held[0])
        elif _unpacked(held) == (path, ordinal):
            del self.held[record_id]
        else:
            raise ValueError(f"{record_id!r} has no claim at {path}:{ordinal}")

    def of(self, record_id: str) -> list[Claim]:
        """The id's claims in path order (none: an empty list)."""
        held = self.held.get(record_id)
        if held is None:
            return []
        return list(held) if type(held) is list else [_unpacked(held)]

    def first(self, record_id: str) -> Claim:
        """The visible occurrence of an id that has claims."""
        held = self.held[record_id]
        return held[0] if type(held) is list else _unpacked(held)

    def copy(self) -> Claims:
        """A copy that later changes to this one do not reach (only the lists are mutable)."""
        return Claims({i: list(held) if type(held) is list else held for i, held in self.held.items()})


def _unpacked(held: str | Claim) -> Claim:
    return (held, 0) if type(held) is str else held


def _packed(claim: Claim) -> str | Claim:
    return claim[0] if claim[1] == 0 else claim
