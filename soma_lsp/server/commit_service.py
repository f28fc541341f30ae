"""Commit ties kept current for the session (docs/spec.md §3.7): a run made at commit C speaks for the
definitions C changed.

Computed in the background — git is read in the pool executor, never on a request's path — from the
pool's records that name a commit, for the git repository of each workspace folder
(`pool.commit_ties`), then swapped in whole (`session.commit_ties`) and every open document refreshed.
Recomputed when the pool or the settings change (the `stale` hook; a no-op when the runs that name a
commit are the same), when HEAD moves (a commit, a checkout, a reset: the reflog's stamp, checked when
a document is opened or saved) and when a tied file is saved ("changed since" may flip). What each
commit changed is cached by sha in the cache directory, so a restart reads only today's files.

The runs are followed, not read whole: the index keeps the ids of the records naming a commit and a
journal of what each update changed (`LiveIndex.changed_since`), so a pool change re-reads only the
records it touched (`Runs`) — reading every record on every change competed with the hovers for the
interpreter at 100k (docs/benchmarks.md § LSP). A whole pass (the first, after a reload or a restore)
steps aside for requests (`foreground.pause`).

Records without ties from git are told once in the log, by reason: no git, not a repository, a commit
this repository does not have (a shallow clone, another repository) — nothing else is disturbed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..knobs import knob_settings
from ..pool.commit_ties import CommitCache, CommitRun, CommitTie, CommitTieMap, commit_ties
from ..pool.gitrepo import GitError, GitRepo
from ..pool.loader import NotRegularFile, open_regular, read_bounded
from ..pool.snapshot import cache_directory
from ..records import Record, Status
from ..retrieval import LiveIndex, is_dead_end
from .. import foreground
from . import convert
from .session import Session

log = logging.getLogger("soma_lsp.server")

#: A burst of pool changes (a sweep's records landing) is coalesced before git is read again.
DELAY = 0.2


#: The largest uncommitted-changes patch read for a run (W&B's diff.patch; a bigger one ties by its commit).
MAX_PATCH_BYTES = 1 << 20


def run_of(record: Record) -> CommitRun:
    """What tying needs of a record (its settings from the `key=value` words of its text; the patch
    of its uncommitted changes when a tracker found one)."""
    dead = is_dead_end(record)
    text = " ".join(t for t in (record.name, record.headline, record.details, record.notes) if t)
    return CommitRun(record.id, record.commit or "", record.repo, dead, record.status == Status.SUCCEEDED and not dead,
                     knob_settings(text), _patch(record.patch))


def _patch(path: str | None) -> bytes | None:
    """A run's patch file, when it is a regular file of at most MAX_PATCH_BYTES (else None)."""
    if not path:
        return None
    try:  # a FIFO in a run folder must not make git ties wait for a writer
        f, status = open_regular(path)
        with f:
            data = read_bounded(f, status.st_size, MAX_PATCH_BYTES)
    except (OSError, NotRegularFile):
        return None
    return data if len(data) <= MAX_PATCH_BYTES else None


class Runs:
    """The `CommitRun` of every record naming a commit, kept in step with one index (module
    docstring). `version` moves whenever a run is added, changed or removed."""

    #: A whole pass over the records steps aside for requests this often (records).
    STEP = 256

    def __init__(self) -> None:
        self._index: LiveIndex | None = None
        self._seen = -1  # the index version the runs reflect
        self._by_id: dict[str, CommitRun] = {}
        self._sorted: tuple[CommitRun, ...] | None = ()
        self.version = 0

    def follow(self, index: LiveIndex) -> tuple[CommitRun, ...]:
        """The runs as the index stands now, in id order (the changed records read again)."""
        seen = index.version  # read first: what changes meanwhile is read again next time
        changed = index.changed_since(self._seen) if index is self._index else None
        if changed is None:
            self._by_id = {}
            changed = index.ids_naming_a_commit()
            self.version += 1
            self._sorted = None
        for n, record_id in enumerate(changed):
            if n % self.STEP == 0:
                foreground.pause()
            self._reread(index, record_id)
        self._index, self._seen = index, seen
        if self._sorted is None:
            self._sorted = tuple(self._by_id[i] for i in sorted(self._by_id))
        return self._sorted

    def _reread(self, index: LiveIndex, record_id: str) -> None:
        record = index.get(record_id)
        run = run_of(record) if record is not None and record.commit else None
        old = self._by_id.get(record_id)
        if run == old and (run is None or (run.settings, run.patch) == (old.settings, old.patch)):
            return
        if run is None:
            del self._by_id[record_id]
        else:
            self._by_id[record_id] = run
        self.version += 1
        self._sorted = None


class CommitTieService:
    """Keeps `session.commit_ties` current (module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._task: asyncio.Task | None = None
        self._again = False
        self._inputs: tuple | None = None  # what the current map was computed from
        self._roots: tuple[str, ...] = ()  # the repositories it was computed for
        self._told: set[str] = set()  # reasons already logged
        self._runs = Runs()
        session.stale.subscribe(self.schedule)
        session.settled.subscribe(self._settled)

    def schedule(self) -> None:
        """Recompute soon (once more after a run in progress, not twice in parallel)."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = self.session.spawn(self._run())

    async def _settled(self, uri: str, delay: float, lenses: bool) -> None:
        """An opened or saved document: HEAD may have moved, a tied file may have changed."""
        if delay:
            return  # a pause in typing: nothing on disk changed
        path = convert.uri_to_path(uri)
        if path and (self.session.commit_ties.for_path(convert.real(path)) or self._head_moved()):
            self._inputs = None
            self.schedule()

    def _head_moved(self) -> bool:
        return self._inputs is not None and self._inputs[1] != _head_stamps(self._roots)

    async def _run(self) -> None:
        while True:
            self._again = False
            await asyncio.sleep(DELAY)
            found = await self.session.run_pool(self._compute)
            if found is not None:
                self.session.commit_ties = found
                self.session.refresh_documents()
            if not self._again:
                return

    def _compute(self) -> CommitTieMap | None:
        """The new map, or None when nothing it depends on changed (pool executor)."""
        session = self.session
        index = session.index
        repos = repositories(session.folders() if index.ids_naming_a_commit() else (), self._tell)
        runs = self._runs.follow(index) if repos else ()  # (no repository: no ties, whatever the runs)
        self._roots = tuple(repos)
        inputs = (self._runs.version if repos else None, _head_stamps(self._roots), session.settings.snapshot)
        if inputs == self._inputs:
            return None
        self._inputs = inputs
        cache_dir = cache_directory(os.environ) if session.settings.snapshot else None
        return tie_map(runs, repos.values(), cache_dir, self._tell)

    def _tell(self, text: str) -> None:
        """One info line per reason, for the life of the server."""
        if text not in self._told:
            self._told.add(text)
            log.info("%s", text)
            self.session.log_message(f"soma: {text}")


def repositories(folders: Iterable[str], tell: Callable[[str], None]) -> dict[str, GitRepo]:
    """The git repository of each folder, by root (`tell` says why a folder has none)."""
    repos: dict[str, GitRepo] = {}
    for folder in folders:
        repo, reason = GitRepo.find(folder)
        if repo is None:
            tell(f"no ties from git for {folder}: {reason}")
        else:
            repos.setdefault(repo.root, repo)
    return repos


def tie_map(runs: Sequence[CommitRun], repos: Iterable[GitRepo], cache_dir: Path | None,
            tell: Callable[[str], None]) -> CommitTieMap:
    """The commit ties of `runs` in each repository (what each commit changed cached in `cache_dir`,
    a file per repository; None: not kept). Also what `soma-lsp explain` shows."""
    by_path: dict[str, tuple[CommitTie, ...]] = {}
    skipped: dict[str, str] = {}
    for repo in repos:
        cache = CommitCache(_cache_path(cache_dir, repo.root))
        try:
            found = commit_ties(repo, runs, cache)
            cache.save()
        except (GitError, OSError) as error:
            tell(f"no ties from git for {repo.root}: {error}")
            continue
        by_path.update(found.by_path)
        skipped.update(found.skipped)
    if skipped:
        tell(f"{len(skipped)} runs with a commit tie nothing here, e.g. {next(iter(skipped.values()))}")
    log.info("commit ties: %d on %d files from %d runs", sum(map(len, by_path.values())), len(by_path), len(runs))
    return CommitTieMap(by_path, skipped)


def _cache_path(cache_dir: Path | None, root: str) -> str | None:
    if cache_dir is None:
        return None
    key = hashlib.blake2b(root.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return str(cache_dir / f"commits-{key}.json")


def _head_stamps(roots: tuple[str, ...]) -> tuple:
    """The reflog's stamp of each repository: it moves with every commit, checkout and reset."""
    stamps = []
    for root in roots:
        try:
            status = os.stat(os.path.join(root, ".git", "logs", "HEAD"))
            stamps.append((status.st_mtime_ns, status.st_size))
        except OSError:
            stamps.append(None)
    return tuple(stamps)
