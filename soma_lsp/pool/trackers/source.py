"""What every tracker source is to the pool: a set of runs under one key prefix, synced by fingerprint.

A source owns the pool keys that start with its `prefix` (one key per run: a run folder's file, or a
URI with the run id). `sync(known, hint)` is given the keys the pool holds for it, with the stamp
each was read with, and returns only what differs: a fresh `FileLoad` for each run that is new or
whose fingerprint changed, None for each run that is gone. So a restart from the snapshot, or a
poll that finds nothing new, rebuilds no record. A store that cannot be read now raises
`TrackerError` with the message the user sees; the pool keeps the last good records.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..loader import FileLoad

Stamp = bytes  # a run's fingerprint, as `FileLoad.stamp`


class TrackerError(Exception):
    """A store that cannot be read now (down, locked, damaged, refused, of an unknown schema)."""


@dataclass(slots=True)
class Scan:
    """What a reader found: key → (fingerprint, a thunk building the run's FileLoad), and which keys
    the scan covered (a partial scan, say of one changed run folder, says nothing about the others)."""

    runs: dict[str, tuple[Stamp, Callable[[], FileLoad | None]]]
    covers: Callable[[str], bool]
    #: when the reader knows exactly which keys are gone (a delta scan, whose `runs` hold only what
    #: changed), those keys; then the pool's other keys are neither listed nor touched
    gone: frozenset[str] | None = None


class TrackerSource:
    """Base of the readers: `kind` and `entry` name it to the user; `scan(hint)` reads the store."""

    kind = "tracker"
    #: how it is followed live: "watch" (a folder: watch `path`), "poll" (SQLite: cheap `changed()`
    #: checks), "server" (REST: `scan("poll")` every pollSeconds, a full scan now and then)
    follow = "watch"
    #: a watched folder is also scanned whole this often (seconds), for changes no event reports; None: never
    rescan_seconds: float | None = None

    def __init__(self, entry: str, prefix: str) -> None:
        self.entry = entry
        self.prefix = prefix

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.entry!r})"

    def owns(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def scan(self, hint: Any = None) -> Scan:
        raise NotImplementedError

    def sync(self, known: Mapping[str, Stamp | None], hint: Any = None,
             early: Callable[[dict[str, FileLoad]], None] | None = None) -> dict[str, FileLoad | None]:
        """The changes since `known` (key → the stamp the pool holds): new or changed runs' loads,
        None for runs gone. Raises `TrackerError`. A source may hand some new runs' loads to `early`
        before it returns (a first read in chunks: `mlflow_sqlite_apart`), which are then not in what
        it returns."""
        found = self.scan(hint)
        if found.gone is not None:
            changes: dict[str, FileLoad | None] = {key: None for key in found.gone if key in known}
        else:
            changes = {key: None for key in known if key not in found.runs and found.covers(key)}
        for key, (stamp, build) in found.runs.items():
            if known.get(key) != stamp or key not in known:
                load = build()  # None: not a record after all (a run deleted since it was listed)
                if load is not None or key in known:
                    changes[key] = load
        return changes


class FolderSource(TrackerSource):
    """A store that is a folder (`mlruns/`, `wandb/`): its runs' keys are paths below it; it is
    followed by watching it."""

    follow = "watch"

    def __init__(self, path: str) -> None:
        super().__init__(path, path.rstrip(os.sep) + os.sep)
        self.path = path


def stat_of(path: str) -> tuple[int, int, int] | None:
    """(size, mtime_ns, inode) of a file, None when it is not there: what a folder's fingerprint is made of."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def fingerprint(*parts: Any) -> Stamp:
    """A stable stamp of a run's content (the same in every process, unlike `hash`): 16 bytes of
    digest, held as they come (49 bytes a run; two ints made of them were 128)."""
    # orjson, not marshal: marshal's bytes depend on how objects are shared (its back-references)
    return hashlib.blake2b(orjson.dumps(parts, default=repr), digest_size=16).digest()


def everything(_key: str) -> bool:
    return True
