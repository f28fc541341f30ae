"""The cache directory: what soma-lsp keeps there, and keeping it small.

It holds pool snapshots (`pool-*.snapshot`, one per set of roots and code version), commit caches
(`commits-*.json`, one per repository) and, briefly, the temporary files of writes in progress
(`.snapshot-*`, `.commits-*`). Roots, versions and repositories come and go, so without
housekeeping the directory only grows (123 snapshots, 189 MB after a day of use, measured).

`tidy` runs after every snapshot write and from `soma-lsp cache --tidy`: it removes what was not used
for `unused_days` (a restore touches a snapshot, so "used" is its mtime), temporaries older than a
day (an interrupted write), then the least recently used entries until the whole is under
`max_bytes` — never the ones named in `keep` (the snapshot just written). It is safe beside other
servers and CLI runs using the same directory: a reader that has a file open keeps reading it after
the unlink (POSIX), a write in progress is a temporary younger than a day, and a pool whose snapshot
was removed reads its files again and writes a new one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DAY = 86400
UNUSED_DAYS = 30
MAX_BYTES = 1 << 30
_KINDS = (("pool-", ".snapshot", "snapshot"), ("commits-", ".json", "commits"),
          (".snapshot-", "", "temporary"), (".commits-", "", "temporary"))


@dataclass(frozen=True, slots=True)
class CacheLimits:
    """How long an unused entry is kept, and how large the directory may grow (settings
    `soma.cache.unusedDays`, `soma.cache.maxSizeMB`)."""

    unused_days: float = UNUSED_DAYS
    max_bytes: int = MAX_BYTES


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of the cache directory that soma-lsp wrote."""

    path: Path
    kind: str  # "snapshot" | "commits" | "temporary"
    size: int
    used: float  # mtime: the last write or restore

    def age_days(self, now: float) -> float:
        return max(0.0, now - self.used) / DAY


def entries(directory: str | os.PathLike) -> list[Entry]:
    """soma-lsp's files in `directory`, least recently used first (anything else there is not ours)."""
    found = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        kind = next((k for prefix, suffix, k in _KINDS if name.startswith(prefix) and name.endswith(suffix)), None)
        if kind is None:
            continue
        path = Path(directory, name)
        try:
            status = path.lstat()
        except OSError:
            continue  # removed meanwhile
        if path.is_file() and not path.is_symlink():
            found.append(Entry(path, kind, status.st_size, status.st_mtime))
    return sorted(found, key=lambda e: (e.used, e.path.name))


def _remove(entry: Entry) -> bool:
    try:
        entry.path.unlink()
    except FileNotFoundError:
        return False  # another process tidied it first
    except OSError:
        return False
    return True


def tidy(directory: str | os.PathLike, limits: CacheLimits = CacheLimits(), *,
         keep: Iterable[str | os.PathLike] = ()) -> list[Entry]:
    """Remove stale entries, then the least recently used until under the size limit; returns them."""
    now = time.time()
    unused_days, max_bytes = limits.unused_days, limits.max_bytes
    kept = {os.path.abspath(k) for k in keep}
    removed: list[Entry] = []
    remaining: list[Entry] = []
    for entry in entries(directory):
        if os.path.abspath(entry.path) in kept:
            remaining.append(entry)
            continue
        limit = 1 if entry.kind == "temporary" else unused_days
        if entry.age_days(now) > limit and _remove(entry):
            removed.append(entry)
        else:
            remaining.append(entry)
    total = sum(e.size for e in remaining)
    for entry in remaining:  # least recently used first
        if total <= max_bytes:
            break
        if os.path.abspath(entry.path) in kept or entry.kind == "temporary" and entry.age_days(now) <= 1:
            continue
        if _remove(entry):
            removed.append(entry)
            total -= entry.size
    return removed


def clear(directory: str | os.PathLike) -> list[Entry]:
    """Remove every entry but writes in progress (a fresh temporary); returns them."""
    now = time.time()
    return [e for e in entries(directory)
            if not (e.kind == "temporary" and e.age_days(now) <= 1) and _remove(e)]
