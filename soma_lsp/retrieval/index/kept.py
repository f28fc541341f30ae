"""What the index keeps between queries while its layout stands: small dicts of the last few values of
something costly (a ranking's answers, per-slot float32 vectors, per-record weightings), each bounded."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


def kept(cache: dict, key: Hashable, make: Callable[[], T], limit: int) -> T:
    """`cache[key]`, made by `make()` when it is not there; the cache holds at most `limit` values,
    the least recently used dropped first (a dict keeps insertion order: a value used is put last)."""
    found = cache.pop(key, None)
    if found is None:
        found = make()
    cache[key] = found
    while len(cache) > limit:
        cache.pop(next(iter(cache)))
    return found
