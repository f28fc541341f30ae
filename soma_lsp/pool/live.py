"""The live pool: every record file of the pool roots, loaded, validated and kept in step with the disk.

`LivePool.load()` reads everything (with progress); `apply(paths)` re-reads only the files named
(created, changed, deleted or renamed — directories too) and updates only their records in the index,
in one `index.update` per batch of whole files, so a query never sees half of a file's update.
Concurrent `apply` calls coalesce: paths queued while another thread applies are taken in by the next
round, and every call returns once its own paths are applied.

Duplicate ids: the first occurrence in path order (sorted absolute paths, then line order) is the
visible one; later ones are reported as `duplicate` problems. When the winning file changes or
disappears, the next occurrence becomes visible.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..gcpause import collector_paused
from ..records import Record
from ..retrieval import CountedLines
from ..stored import RecordStore, items_of
from . import counting, loader, read_ahead, snapshot, trackers
from .cache import CacheLimits
from .claims import Claims
from .discover import Roots, normalize
from .loader import MAX_JSON_BYTES, MAX_YAML_BYTES, FileLoad, file_format, load_file
from .parts import Parts
from .problems import MAX_PER_FILE, Problem, more_problems

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class PoolChange:
    """What one applied batch changed: `files` whose records or problems changed (deleted ones too),
    ids that became visible or were replaced (`added`) and ids that are gone (`removed`)."""

    files: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    version: int


class LivePool:
    """The records of a set of pool roots, mirrored into a live index (or none, for `soma-lsp check`)."""

    def __init__(self, roots: Iterable[str | os.PathLike], index=None, *, batch_records: int = 20_000,
                 batch_files: int = 500, max_json_bytes: int = MAX_JSON_BYTES,
                 max_yaml_bytes: int = MAX_YAML_BYTES, cache_dir: str | os.PathLike | None = None,
                 cache_limits: CacheLimits = CacheLimits(), in_parts: bool = True) -> None:
        """`cache_dir`: where snapshots live (see `pool.snapshot`); None for none. Only an indexed pool
        uses them. `cache_limits`: how the directory is tidied after a snapshot is written. `in_parts`:
        a big `.jsonl` file read for the first time is committed in parts (`pool.parts`), for whoever
        queries while it loads; a command that answers once it is loaded says False (each part is one
        more commit and segment merge: ≈ +90 MB at the peak of a 100k-line first load). A root that
        is a tracker (`pool.trackers.source_for`: a URI, an `mlruns/` or `wandb/` folder) is one of
        `self.trackers`, not a folder of record files."""
        entries = [os.fspath(root) for root in roots]
        self.trackers = [source for source in map(trackers.source_for, entries) if source is not None]
        tracked = {source.entry for source in self.trackers}
        self._roots = Roots(entry for entry in entries if entry not in tracked
                            and os.path.realpath(entry) not in tracked)
        self.index = index
        self.batch_records = batch_records
        self.batch_files = batch_files
        self._limits = {"max_json_bytes": max_json_bytes, "max_yaml_bytes": max_yaml_bytes}
        self.snapshot_path = None if cache_dir is None or index is None else \
            snapshot.snapshot_path(cache_dir, self._roots.paths + [s.entry for s in self.trackers], self._limits)
        self.cache_limits = cache_limits
        self.in_parts = in_parts
        self._store: RecordStore | None = None  # records of a restored snapshot, built as they are used
        self._lock = threading.RLock()  # the pool's own state (files, claims, problems)
        self._apply_lock = threading.Lock()  # one applier at a time
        self._pending: set[str] = set()
        self._pending_lock = threading.Lock()
        self._files: dict[str, FileLoad] = {}
        self._dirs: dict[str, int] = {}  # directory -> files held in it (for directory events)
        self._claims = Claims()  # id -> its (path, ordinal) occurrences, in path order
        self._visible: dict[str, Record | int] = {}  # int: a position in `_store`
        self._dups: dict[str, list[Problem]] = {}  # id -> problems of its losing occurrences
        self._extra: dict[str, list[Problem]] = {}  # path -> listing problems (symlinks, vanished files)
        self._problem_files: set[str] = set()  # loaded files with problems of their own
        self._subscribers: list[Callable[[PoolChange], None]] = []
        self.version = 0
        self.loading = False
        self.unsaved = False  # changed since the snapshot was restored or saved
        self.restored = 0  # files the last load took from the snapshot (not read)

    # -- reading ------------------------------------------------------------------------------

    @property
    def roots(self) -> list[str]:
        return list(self._roots.paths)

    @property
    def sources(self) -> list[str]:
        """Every entry of the pool: the record folders, then the trackers (URIs, `mlruns/`, `wandb/`)."""
        return self.roots + [source.entry for source in self.trackers]

    @property
    def files(self) -> list[str]:
        """The pool files loaded (readable or not), sorted."""
        with self._lock:
            return sorted(self._files)

    def __len__(self) -> int:
        return len(self._visible)

    def get(self, record_id: str) -> Record | None:
        return self._built(self._visible.get(record_id))

    def records(self) -> list[Record]:
        """The visible records, in id order."""
        with self._lock:
            return [self._built(self._visible[i]) for i in sorted(self._visible)]

    def _built(self, record: Record | int | None) -> Record | None:
        return self._store[record] if type(record) is int else record

    def problems_for(self, path: str) -> list[Problem]:
        """The problems of one file (its own, listing problems, and its duplicate ids), by line."""
        with self._lock:
            return self._problems_of(path, self._duplicates_by_path().get(path, ()))

    @property
    def problems(self) -> dict[str, list[Problem]]:
        """Every file with problems → its problems by line, files in path order."""
        with self._lock:
            duplicates = self._duplicates_by_path()
            paths = set(self._extra) | self._problem_files | duplicates.keys()
            return {path: self._problems_of(path, duplicates.get(path, ())) for path in sorted(paths)}

    def _duplicates_by_path(self) -> dict[str, list[Problem]]:
        """Duplicate-id problems by the path of the ignored occurrence (read from the few duplicates,
        not from a file's records, which may be many and not built yet)."""
        found: dict[str, list[Problem]] = {}
        for dups in self._dups.values():
            for problem in dups:
                found.setdefault(problem.path, []).append(problem)
        return found

    def _problems_of(self, path: str, duplicates: Iterable[Problem]) -> list[Problem]:
        found = list(self._extra.get(path, ()))
        if path in self._files:
            found.extend(self._files[path].problems)
            duplicates = list(duplicates)
            found.extend(duplicates[:MAX_PER_FILE])
            if len(duplicates) > MAX_PER_FILE:  # (a file that repeats one record a million times)
                found.append(more_problems(path, len(duplicates) - MAX_PER_FILE, "error",
                                           max(p.line for p in duplicates[:MAX_PER_FILE])))
        return sorted(found, key=lambda p: (p.line, p.severity != "error"))

    def summary(self) -> dict:
        """Counts for a status line or `soma-lsp check`: records, files, errors, warnings, by kind."""
        problems = [p for ps in self.problems.values() for p in ps]
        return {"records": len(self._visible), "files": len(self._files),
                "errors": sum(p.severity == "error" for p in problems),
                "warnings": sum(p.severity == "warning" for p in problems),
                "errors_by_kind": dict(sorted(Counter(p.kind for p in problems if p.severity == "error").items())),
                "warnings_by_kind": dict(sorted(Counter(p.kind for p in problems
                                                        if p.severity == "warning").items()))}

    def subscribe(self, callback: Callable[[PoolChange], None]) -> Callable[[], None]:
        """Call `callback(change)` after each applied batch (from the applying thread); returns an
        unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    # -- loading ------------------------------------------------------------------------------

    def load(self, progress: Progress | None = None) -> None:
        """(Re)load every file of every root; files gone since the last load are dropped, files whose
        stamp is unchanged are kept. The first load starts from the snapshot, if there is one to trust.
        `progress(done, total)` is called in bytes (of the files read), at most about once per percent
        and at the end."""
        with self._apply_lock, collector_paused():
            self.loading = True
            if self.index is not None:
                self.index.filling = True
            try:
                listing_problems: list[Problem] = []
                listed = self._roots.walk(problems=listing_problems)
                if not self._files and self.snapshot_path is not None:
                    self._restore()
                with self._lock:
                    self._extra = {}
                    for problem in listing_problems:
                        self._extra.setdefault(problem.path, []).append(problem)
                    gone = {path for path in set(self._files) - {item.path for item in listed}
                            if not self._tracked(path)}
                    files = self._files
                    sizes = {item.path: item.size for item in listed
                             if item.stamp is None or item.path not in files or files[item.path].stamp != item.stamp}
                    self.restored = len(listed) - len(sizes) if self._store is not None else 0
                del listed  # (its stamps, ≈ 30 MB at 100k files, are not held while the files are read)
                self._run(sorted(sizes.keys() | gone), sizes, progress, frozenset(gone))
                for source in self.trackers:
                    self._sync(source, None)
            finally:
                self.loading = False
                if self.index is not None:
                    self.index.filling = False

    def _restore(self) -> None:
        """Stand the pool and its index up from the snapshot (`load` then reads what changed since)."""
        state = snapshot.read(self.snapshot_path)
        if state is None:
            return
        try:
            self.index.restore(state.index, state.store)
        except Exception:  # noqa: BLE001 - a snapshot that does not fit means reading the pool
            log.exception("ignoring snapshot %s: its index does not fit", self.snapshot_path)
            return
        with self._lock:
            self._files = {load.path: load for load in state.files}
            self._dirs = dict(Counter(map(_directory, self._files)))
            self._problem_files = {load.path for load in state.files if load.problems}
            self._claims, self._visible, self._dups, self._store = state.claims, state.visible, state.dups, state.store
            self.version += 1
            self.unsaved = False
        log.info("pool restored from %s: %d records", self.snapshot_path, len(self._visible))

    def settle_lines(self) -> None:
        """Take the lines' digests that the first reads of big `.jsonl` files left for later
        (`pool.lines`): once the load's result is out, before a change to such a file needs them."""
        with self._lock:
            tables = [load.line_records for load in self._files.values()
                      if load.line_records is not None and load.line_records.pending]
        for table in tables:
            table.settle()

    def save_snapshot(self) -> bool:
        """Write the snapshot of the pool as it stands (a consistent cut: no update is applied while
        it is taken; records are encoded after). False when there is nowhere to write or it failed."""
        if self.snapshot_path is None:
            return False
        with self._apply_lock, self._lock:
            state = snapshot.PoolState([self._files[p] for p in sorted(self._files)], self._claims.copy(), {},
                                       dict(self._dups), self.index.export(), self._store)
            self.unsaved = False
        try:
            snapshot.write(self.snapshot_path, state, self.cache_limits)
        except Exception as error:  # noqa: BLE001 - a snapshot is an optimisation: log, never fail
            log.warning("could not write the pool snapshot %s: %r", self.snapshot_path, error)
            self.unsaved = True
            return False
        return True

    def apply(self, paths: Iterable[str | os.PathLike]) -> None:
        """Re-read these paths (files or directories; created, changed, deleted or renamed — pass both
        names of a rename) and update only their records. Blocking and thread-safe: run it in a worker
        thread from asyncio. Returns once these paths are applied (possibly by a concurrent call)."""
        with self._pending_lock:
            self._pending.update(normalize(p) for p in paths)
        with self._apply_lock:
            with self._pending_lock:
                batch, self._pending = self._pending, set()
            if not batch:
                return
            targets = self._expand(batch)
            if targets:
                self._run(sorted(targets), None, None)

    def _expand(self, paths: set[str]) -> set[str]:
        """The pool files these event paths stand for: the files themselves, every pool file under a
        directory, and every known file under a directory that is gone."""
        roots = self._roots
        targets: set[str] = set()
        with self._lock:
            known = self._files
            for path in paths:
                if path in known or roots.is_pool_file(path):
                    targets.add(path)
                    continue
                if not roots.is_visible(path):
                    continue
                if os.path.islink(path):  # a directory symlink: its real directory, or nothing (as a full walk)
                    path = os.path.realpath(path)
                    if not roots.is_visible(path):
                        continue
                # The files held under it: a scan of their names (5-10 ms at 100k), only for a directory
                # that holds some — a map of the files by directory cost ≈ 35 B a file (issue 22 point 2)
                prefix = path.rstrip(os.sep) + os.sep
                holds = path in self._dirs or any(d.startswith(prefix) for d in self._dirs)
                under = {f for f in known if f.startswith(prefix)} if holds else set()
                if os.path.isdir(path):
                    # A directory event: pick up files not known yet (a directory created or moved in,
                    # whose files may predate the watch) and known ones that are gone; files that merely
                    # changed get their own events.
                    listed = {item.path for item in roots.walk(top=path)}
                    targets.update(listed - under)
                    targets.update(under - listed)
                else:
                    targets.update(under)  # a directory deleted or moved away
        return targets

    def _run(self, paths: list[str], sizes: dict[str, int] | None, progress: Progress | None,
             gone: frozenset[str] = frozenset()) -> None:
        """Read `paths` (those in `sizes` come from a listing, except `gone` ones) and commit them in
        batches of whole files."""
        total = sum(sizes.values()) if sizes else 0
        done = 0
        step = max(total // 100, 1)
        next_report = step
        last = [0]

        def report(value: int) -> None:
            nonlocal next_report
            value = min(value, total)
            next_report = value + step
            last[0] = value
            progress(value, total)

        if progress is not None:
            progress(0, total)

        def streamed(read: int) -> None:  # progress inside one big .jsonl file
            if progress is not None and done + read >= next_report:
                report(done + read)

        files_per_batch = self.batch_files if sizes is None else 40 * self.batch_files  # (re)load: fewer, bigger
        batch: dict[str, FileLoad | None] = {}
        extras: dict[str, list[Problem]] = {}
        batch_records = 0
        # big .jsonl files read for the first time are counted apart meanwhile (pool.counting)
        apart = counting.start(((p, sizes[p]) for p in paths if p in sizes and p not in gone and p not in self._files),
                               self._limits["max_json_bytes"], in_parts=self.in_parts) \
            if sizes and self.index is not None else {}
        counted: dict[str, Callable[[], CountedLines | None]] = {}
        # and many small files listed are read ahead by another (pool.read_ahead)
        whole = [p for p in paths if p in sizes and p not in gone and file_format(p) != "jsonl"] if sizes else []
        ahead = read_ahead.start(whole, [self._limits["max_yaml_bytes" if file_format(p) == "yaml" else "max_json_bytes"]
                                         for p in whole], loader.RACY_NS)

        def commit_part(path: str, part: FileLoad) -> None:  # a first read's prefix (pool.parts)
            nonlocal batch, extras, batch_records, counted
            if batch:
                self._commit(batch, extras, counted)
                batch, extras, batch_records, counted = {}, {}, 0, {}
            child = apart.get(path)
            fetch = None
            if child is not None and path in self._files:
                fetch = functools.partial(child.counts, part)
            elif child is not None:  # the first part, counted here: the child, maybe still starting, skips it
                child.counted_here(part)
            self._commit({path: part}, {}, {path: fetch} if fetch else {})

        try:
            for path in paths:
                load = None
                listed = sizes is not None and path in sizes and path not in gone
                if listed or self._readable(path, extras):  # the listing checked what _readable checks
                    size = sizes.get(path, 0) if sizes else 0
                    child = apart.get(path)
                    first_read = listed and path not in self._files and self.index is not None and self.in_parts
                    load = load_file(path, progress=streamed if size > step else None,
                                     previous=self._files.get(path), **self._limits,
                                     batch=Parts(functools.partial(commit_part, path)) if first_read else None,
                                     read=ahead.take(path) if ahead is not None and listed else None)
                    if not load.exists:  # gone since it was listed (or since the event)
                        if listed:
                            extras[path] = load.problems
                        load = None
                    elif child is not None:
                        counted[path] = functools.partial(child.counts, load)
                batch[path] = load
                batch_records += len(load.records) if load is not None else 0
                if sizes:
                    done += sizes.get(path, 0)
                    if progress is not None and done >= next_report:
                        report(done)
                if batch_records >= self.batch_records or len(batch) >= files_per_batch:
                    self._commit(batch, extras, counted)
                    batch, extras, batch_records, counted = {}, {}, 0, {}
            if batch:
                self._commit(batch, extras, counted)
        finally:
            for child in apart.values():
                child.close()
            if ahead is not None:
                ahead.close()
        if progress is not None and last[0] != total:
            progress(total, total)

    def _readable(self, path: str, extras: dict[str, list[Problem]]) -> bool:
        """A pool file that exists, and if it is a symlink, points inside the roots."""
        if not self._roots.is_pool_file(path):
            return False
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode) and not self._roots.inside(os.path.realpath(path)):
            extras[path] = [Problem(path, 0, "", "symlink to outside the pool roots; not followed", "warning",
                                    "symlink")]
            return False
        return True

    # -- trackers -----------------------------------------------------------------------------

    def _tracked(self, key: str) -> bool:
        return any(source.owns(key) for source in self.trackers)

    def sync_tracker(self, source: trackers.TrackerSource, hint: object = None) -> str | None:
        """Bring one tracker's runs up to date (`hint`: what its follower saw change; None: all of it).
        Returns the problem reading it now, or None. Blocking and thread-safe, as `apply`."""
        with self._apply_lock:
            return self._sync(source, hint)

    def _sync(self, source: trackers.TrackerSource, hint: object) -> str | None:
        """Apply what differs from the runs held (their stamps). A store that cannot be read keeps its
        last good records and gets one `tracker` problem at its entry, logged when it first appears
        or changes and when it clears — not at every poll."""
        with self._lock:
            known = _Stamps(self._files, source.owns)  # (a view: only this thread changes `_files` now)
            before = self._extra.get(source.entry)
        message = None
        early: dict[str, FileLoad] = {}

        def take(loads: dict[str, FileLoad]) -> None:  # runs handed before the end: committed as they come
            early.update(loads)
            if len(early) >= self.batch_records:
                self._commit(dict(early), {}, {})
                early.clear()

        try:
            changes = source.sync(known, hint, take)
        except trackers.TrackerError as error:
            changes, message = {}, str(error)
        except Exception as error:  # noqa: BLE001 - a reader's bug must not take the pool down
            log.exception("reading %s failed", source)
            changes, message = {}, f"could not read {source.kind} {source.entry}: {error!r}"
        changes = early | changes
        problem = [Problem(source.entry, 0, "", message, "error", "tracker")] if message else None
        if problem != before:
            if message:
                log.warning("%s", message)
            elif before:
                log.info("%s %s readable again", source.kind, source.entry)
        if changes or problem != before:
            keys = sorted(changes)
            for start in range(0, max(len(keys), 1), self.batch_records):
                batch = {key: changes[key] for key in keys[start:start + self.batch_records]}
                if start == 0:
                    batch.setdefault(source.entry, None)  # the store's own problem, set or cleared
                self._commit(batch, {source.entry: problem} if problem else {}, {})
        return message

    # -- committing ---------------------------------------------------------------------------

    def _commit(self, batch: dict[str, FileLoad | None], extras: dict[str, list[Problem]],
                counted: Mapping[str, Callable[[], CountedLines | None]]) -> None:
        """Swap these files' records in, as one index update (`counted`: what was counted apart, by
        file); resolve duplicate ids again."""
        with self._lock:
            changed = set(batch)
            add, remove = self._resolve(self._swap(batch, extras), changed)
            change = PoolChange(tuple(sorted(changed)), tuple(sorted(r.id for r in add)), tuple(sorted(remove)),
                                self.version + 1)  # (before the update: meanwhile, counting apart finishes)
            self.version += 1
            self.unsaved = True
        # The index's work (seconds for a big part, waiting for what is counted apart) is done off the
        # pool's lock — writers are one at a time under `_apply_lock` — so that a status asked
        # meanwhile (`summary`, from the server's event loop) does not wait for it.
        if self.index is not None and (add or remove):
            self.index.update(add=add, remove=remove, counted=counted)
        for callback in list(self._subscribers):
            try:
                callback(change)
            except Exception:  # noqa: BLE001 - a subscriber must not break the pool
                log.exception("pool subscriber %r failed", callback)

    def _swap(self, batch: dict[str, FileLoad | None], extras: dict[str, list[Problem]]) -> set[str]:
        """Put these files' loads in place of the ones held and move their records' claims; the ids
        whose claims changed. A file not held yet (every file of a first load) has nothing to compare
        or withdraw: its records' claims are only added."""
        files, extra, problem_files, claims, dirs = (self._files, self._extra, self._problem_files, self._claims,
                                                     self._dirs)
        affected: set[str] = set()
        for path, load in batch.items():
            if path in extras:
                extra[path] = extras[path]
            else:
                extra.pop(path, None)
            old = files.pop(path, None)
            kept = 0
            if old is not None:
                problem_files.discard(path)
                old_records = old.records
                if load is not None:
                    kept = _same_prefix(items_of(old_records), items_of(load.records))
                for ordinal in range(kept, len(old_records)):
                    record_id = old_records[ordinal].id
                    claims.remove(record_id, path, ordinal)
                    affected.add(record_id)
            if (old is None) != (load is None):  # a file new or gone: its directory holds one more or less
                directory = _directory(path)
                count = dirs.get(directory, 0) + (1 if old is None else -1)
                if count:
                    dirs[directory] = count
                else:
                    del dirs[directory]
            if load is not None:
                files[path] = load
                if load.problems:
                    problem_files.add(path)
                records = load.records
                for ordinal in range(kept, len(records)):
                    record_id = records[ordinal].id
                    claims.add(record_id, path, ordinal)
                    affected.add(record_id)
        return affected

    def _resolve(self, affected: set[str], changed: set[str]) -> tuple[list[Record], list[str]]:
        """Which occurrence of each affected id is visible now (the records to add to the index, the
        ids to remove from it), and the duplicate problems of the others (their files go to `changed`)."""
        files, visible_now, claims = self._files, self._visible, self._claims
        add: list[Record] = []
        remove: list[str] = []
        for record_id in affected:
            old_dups = self._dups.pop(record_id, None)
            if old_dups:
                changed.update(p.path for p in old_dups)
            occurrences = claims.of(record_id)
            visible = self._built(visible_now.get(record_id))
            if not occurrences:
                if visible is not None:
                    del visible_now[record_id]
                    remove.append(record_id)
                continue
            path, ordinal = occurrences[0]
            winner = files[path].records[ordinal]
            if winner is not visible:
                visible_now[record_id] = winner
                add.append(winner)
            if len(occurrences) > 1:
                root = self._roots.root_of(path)
                shown = os.path.relpath(path, root) if root else path
                where = f"{shown}:{winner.source.line + 1}"
                dups = []
                for other_path, other in occurrences[1:]:
                    line = files[other_path].records[other].source.line
                    dups.append(Problem(other_path, line, "id", f"duplicate id {record_id!r}, already "
                                        f"defined at {where}; this record is ignored", "error", "duplicate"))
                    changed.add(other_path)
                self._dups[record_id] = dups
        return add, remove


def _same_prefix(old: list, new: list) -> int:
    """How many leading records of a file's old and new load are the same: the same record at the same
    place (an unchanged .jsonl line) needs nothing — the same object, or the same unbuilt position of
    a restored file (compared unbuilt)."""
    kept = 0
    for before, now in zip(old, new):
        if before is not now:
            break
        kept += 1
    return kept


def _directory(path: str) -> str:
    """`os.path.dirname` of a normalized path (absolute, no `//`, no trailing separator), ~2× faster:
    a restart counts 100k paths by directory."""
    return path[:max(path.rfind(os.sep), 1)]


class _Stamps(Mapping):
    """The stamps of the loaded files a tracker owns, as a mapping, without copying: a quick sync of a
    100k-run store looks up a handful of them."""

    def __init__(self, files: dict[str, FileLoad], owns: Callable[[str], bool]) -> None:
        self._files, self._owns = files, owns

    def __getitem__(self, key: str):
        if not self._owns(key):
            raise KeyError(key)
        return self._files[key].stamp

    def get(self, key: str, default=None):  # (Mapping's catches a KeyError: ≈ 1 µs a new run)
        load = self._files.get(key)
        return load.stamp if load is not None and self._owns(key) else default

    def __contains__(self, key: object) -> bool:
        return key in self._files and self._owns(key)

    def __iter__(self):
        return (key for key in list(self._files) if self._owns(key))

    def __len__(self) -> int:
        return sum(1 for _ in self)

