"""Where the pools are (docs/spec.md §1.1) and which files in them are pool files."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from .loader import SUFFIXES, not_regular, stamp_of
from .problems import Problem
from .trackers import is_uri, layout_of, resolve_uri, split_entries

DEFAULT_POOL = os.path.join(".soma", "pool")


def _as_path(folder: str | os.PathLike) -> Path:
    text = os.fspath(folder)
    if text.startswith("file:"):
        text = unquote(urlparse(text).path)
    return Path(text).expanduser()


def pool_roots(workspace_folders: Iterable[str | os.PathLike] = (),
               setting: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
               environ: Mapping[str, str] | None = None) -> list[Path | str]:
    """The pool directories, absolute, de-duplicated, in order.

    The `soma.pool` setting (a path or a list) wins; else `SOMA_POOL` (paths separated by `os.pathsep`);
    else `.soma/pool` under each workspace folder. Relative paths (setting or environment) resolve against
    each workspace folder, or the current directory when there is none. Workspace folders may be paths or
    `file://` URIs. Roots that do not exist (yet) are kept: the pool may be created later.
    Tracker URIs (`http(s)://…`, `sqlite:///…`) are kept as strings (`trackers.resolve_uri`); in
    `SOMA_POOL` they survive the `:` split (`trackers.split_entries`).
    """
    folders = [_as_path(f) for f in workspace_folders] or [Path.cwd()]
    environ = os.environ if environ is None else environ
    if isinstance(setting, str | os.PathLike):
        entries = [os.fspath(setting)] if os.fspath(setting).strip() else []
    else:
        entries = [os.fspath(s) for s in (setting or ()) if os.fspath(s).strip()]
    if not entries:
        entries = split_entries(environ.get("SOMA_POOL", ""))
    if not entries:
        entries = [DEFAULT_POOL]
    roots: list[Path | str] = []
    for entry in entries:
        if is_uri(entry):
            roots.extend(uri for uri in resolve_uri(entry, folders) if uri not in roots)
            continue
        path = _as_path(entry.strip())
        candidates = [path] if path.is_absolute() else [folder / path for folder in folders]
        for candidate in candidates:
            resolved = Path(os.path.realpath(candidate.absolute()))
            if resolved not in roots:
                roots.append(resolved)
    return roots


def is_hidden(name: str) -> bool:
    return name.startswith(".")


def normalize(path: str | os.PathLike) -> str:
    """An absolute path with its directories resolved (symlinks, `..`) but not its last component, so a
    deleted file or a symlinked record file keeps the name the pool knows it by."""
    text = os.path.abspath(os.fspath(path))
    head, tail = os.path.split(text)
    return os.path.join(os.path.realpath(head), tail)


@dataclass(frozen=True, slots=True)
class Listed:
    path: str
    size: int
    stamp: bytes | None = None  # `loader.stamp_of` the file, as `FileLoad.stamp`


class Roots:
    """The resolved roots of a pool, and the rules for what belongs to it."""

    def __init__(self, roots: Iterable[str | os.PathLike]) -> None:
        self.paths: list[str] = []
        #: tracker folders (`mlruns/`, `wandb/`) the walks found below a root: not records (a run's
        #: `meta.yaml` is no record), skipped with a `not-records` warning; events below them too
        self.skipped: set[str] = set()
        for root in roots:
            resolved = os.path.realpath(os.path.abspath(os.fspath(root)))
            if resolved not in self.paths:
                self.paths.append(resolved)

    def root_of(self, path: str) -> str | None:
        """The (innermost) root a normalized path lies under, or None."""
        best = None
        for root in self.paths:
            if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
                if best is None or len(root) > len(best):
                    best = root
        return best

    def relative_parts(self, path: str) -> tuple[str, ...] | None:
        root = self.root_of(path)
        if root is None:
            return None
        rel = os.path.relpath(path, root)
        return () if rel == "." else tuple(rel.split(os.sep))

    def is_pool_file(self, path: str) -> bool:
        """A `.json`/`.jsonl`/`.yaml`/`.yml` file under a root with no hidden component below it, and
        not inside a tracker folder."""
        root = self.root_of(path)
        if root is None or path == root or self._in_skipped(path):
            return False
        rel = path[len(root.rstrip(os.sep)) + 1:]
        if rel.startswith(".") or (os.sep + ".") in rel:
            return False
        return os.path.splitext(rel)[1].lower() in SUFFIXES

    def is_visible(self, path: str) -> bool:
        """Under a root, no hidden component below it (file or directory), not inside a tracker folder."""
        parts = self.relative_parts(path)
        return parts is not None and not any(is_hidden(p) for p in parts) and not self._in_skipped(path)

    def _in_skipped(self, path: str) -> bool:
        return bool(self.skipped) and any(path.startswith(folder + os.sep) for folder in self.skipped)

    def _tracker_folder(self, directory: str, entries: list[os.DirEntry], problems: list[Problem]) -> bool:
        """Whether this listed folder is a tracker's (docs/spec.md §1.1): then it is reported and skipped."""
        kind = layout_of(directory, (e.name for e in entries if e.is_dir(follow_symlinks=False)))
        if kind is None:
            self.skipped.discard(directory)
            return False
        self.skipped.add(directory)
        problems.append(Problem(directory, 0, "", f"{kind} inside a folder of soma records: not read as "
                                "records (name it as a pool entry of its own to read its runs)", "warning",
                                "not-records"))
        return True

    def inside(self, real: str) -> bool:
        return self.root_of(real) is not None

    def walk(self, top: str | None = None, problems: list[Problem] | None = None) -> list[Listed]:
        """Every pool file under `top` (default: every root), sorted by path. Hidden files and directories
        are skipped; symlinks are followed only to targets inside the roots, once (loops are reported)."""
        problems = [] if problems is None else problems
        found: dict[str, Listed] = {}
        seen_dirs: set[str] = set()
        tops = self.paths if top is None else [top]
        for start in tops:
            real = os.path.realpath(start)
            if real in seen_dirs or not self.inside(real):
                continue
            seen_dirs.add(real)
            stack = [real]  # a top reached through a directory symlink lists real names, as a full walk does
            while stack:
                directory = stack.pop()
                try:
                    with os.scandir(directory) as entries:
                        entries = list(entries)
                except FileNotFoundError:
                    continue
                except OSError as error:
                    if directory != real or os.path.isdir(directory):
                        problems.append(Problem(directory, 0, "", f"cannot list directory: "
                                                f"{error.strerror or error}", "warning", "unreadable"))
                    continue
                if self._tracker_folder(directory, entries, problems):
                    continue
                for entry in entries:
                    name = entry.name
                    if is_hidden(name):
                        continue
                    try:
                        if entry.is_symlink():
                            target = os.path.realpath(entry.path)
                            if not self.inside(target):
                                problems.append(Problem(entry.path, 0, "", "symlink to outside the pool roots; "
                                                        "not followed", "warning", "symlink"))
                                continue
                            try:
                                is_dir = entry.is_dir()
                            except OSError:  # ELOOP: a symlink loop
                                problems.append(Problem(entry.path, 0, "", "symlink loop; not loaded", "error",
                                                        "symlink"))
                                continue
                            if is_dir:
                                if target in seen_dirs:
                                    problems.append(Problem(entry.path, 0, "", "symlink loop (directory already "
                                                            "visited); not followed", "warning", "symlink"))
                                else:
                                    seen_dirs.add(target)
                                    stack.append(target)  # files keep real directory paths (see normalize)
                                continue
                        elif entry.is_dir(follow_symlinks=False):
                            seen_dirs.add(entry.path)
                            stack.append(entry.path)
                            continue
                        dot = name.rfind(".")  # (hidden names, with a leading dot, are skipped above)
                        if dot < 0 or name[dot:].lower() not in SUFFIXES:
                            continue
                        try:
                            status = entry.stat()
                        except OSError as error:
                            if error.errno == errno.ELOOP:  # a file symlink loop
                                problems.append(Problem(entry.path, 0, "", "symlink loop; not loaded", "error",
                                                        "symlink"))
                                continue
                            found.setdefault(entry.path, Listed(entry.path, 0))  # load_file reports it
                            continue
                        if not stat.S_ISREG(status.st_mode):  # a FIFO or device would block a reader
                            problems.append(not_regular(entry.path, status.st_mode))
                            continue
                        found.setdefault(entry.path, Listed(entry.path, status.st_size, stamp_of(status)))
                    except OSError:
                        continue
        return [found[p] for p in sorted(found)]
