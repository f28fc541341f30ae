"""Pools from where runs already live: MLflow (file store, SQLite, tracking server) and W&B folders.

A tracker is one more source of records, not a special case: each reader turns the runs of a store
into `FileLoad`s keyed per run (`source.TrackerSource`), mapped to soma records by one table
(`mapping`, docs/trackers.md) and validated by `records.parse_record` like any record file; the
`LivePool` holds them next to record files (duplicates, problems, snapshot, index updates alike).

* `mlflow_files.FileStore` — an `mlruns/` folder (recognised by its layout);
* `mlflow_sqlite.SqliteStore` — `sqlite:///relative/mlflow.db` or `sqlite:////absolute/mlflow.db`;
* `mlflow_rest.TrackingServer` — `http://host:port`, `https://…`;
* `wandb_dir.WandbFolder` — a `wandb/` folder of `run-*` / `offline-run-*` folders;
* `follow.TrackerFollower` — keeps them live (folder events, SQLite changes, server polls).

The product never imports mlflow or wandb: these read the stores' files, tables and REST API directly.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Mapping

from .mlflow_files import FileStore, is_experiment, is_store
from .source import TrackerError, TrackerSource
from .wandb_dir import WandbFolder, is_folder

#: imported when first used (`__getattr__`, `source_for`): their `urllib`/`http` and `sqlite3` cost a
#: command that reads a folder of record files ~50 ms of its start
_LAZY = {"TrackingServer": ".mlflow_rest", "SqliteStore": ".mlflow_sqlite"}

__all__ = ["FileStore", "SqliteStore", "TrackerError", "TrackerSource", "TrackingServer", "WandbFolder",
           "is_tracker_folder", "is_uri", "layout_of", "resolve_uri", "source_for", "split_entries"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_PORT = re.compile(r"\d+(/.*)?")
URI_SCHEMES = ("http://", "https://", "sqlite://")
_WANDB_RUN = re.compile(r"(offline-)?run-\d{8}_\d{6}-\w+")  # W&B's run folders: run-20261205_093000-abc123


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_uri(entry: str) -> bool:
    """A pool entry naming a tracker by URI (not a path)."""
    return entry.strip().lower().startswith(URI_SCHEMES)


def split_entries(text: str, separator: str = os.pathsep) -> list[str]:
    """`SOMA_POOL` split on `separator` so that URIs survive when it is `:`: a piece that is only a
    scheme name (`http`, `sqlite`) is joined to the next when that starts with `//`, and a piece of
    digits (a port, maybe followed by `/path`) is joined to the URL before it when its host has no port
    yet. So `http://host:5000:/data/pool:sqlite:///mlflow.db` is three entries."""
    pieces = text.split(separator)
    if separator != ":":
        return [p for p in pieces if p.strip()]
    entries: list[str] = []
    for piece in pieces:
        last = entries[-1] if entries else None
        if last is not None and _SCHEME.fullmatch(last) and piece.startswith("//"):
            entries[-1] = f"{last}:{piece}"
        elif last is not None and "://" in last and _PORT.fullmatch(piece) \
                and ":" not in last.split("://", 1)[1].split("/", 1)[0]:
            entries[-1] = f"{last}:{piece}"
        else:
            entries.append(piece)
    return [e for e in entries if e.strip()]


def resolve_uri(entry: str, folders: Iterable[os.PathLike | str]) -> list[str]:
    """A tracker URI made canonical: `http(s)://…` without a trailing `/`; `sqlite:///path` as MLflow
    (SQLAlchemy) reads it — three slashes then a relative path (resolved against each workspace
    folder), four slashes for an absolute one — written back as `sqlite:///` + the absolute path."""
    text = entry.strip()
    if not text.lower().startswith("sqlite:"):
        return [text.rstrip("/")]
    path = text[len("sqlite:///"):] if text.lower().startswith("sqlite:///") else text[len("sqlite:"):]
    if os.path.isabs(path):
        return ["sqlite:///" + os.path.realpath(path)]
    return list(dict.fromkeys("sqlite:///" + os.path.realpath(os.path.join(os.fspath(f), path)) for f in folders))


def is_tracker_folder(path: str) -> bool:
    """A folder laid out as an MLflow file store (`mlruns/`) or a W&B folder (`wandb/`)."""
    return is_store(path) or is_folder(path)


def layout_of(folder: str, subfolders: Iterable[str]) -> str | None:
    """What tracker's folder `folder` is, judged from the names of its sub-folders (a listing the
    caller already has): "a W&B folder" (`run-<date>_<time>-<id>`, `offline-run-…`), "an MLflow
    file store" (a numbered experiment folder with its `meta.yaml`), else None. Cheap enough for every
    folder of a pool walk: only numbered sub-folders cost a look inside."""
    names = list(subfolders)
    if any(_WANDB_RUN.fullmatch(name) for name in names):
        return "a W&B folder"
    if any(name.isdigit() and is_experiment(os.path.join(folder, name)) for name in names):
        return "an MLflow file store"
    return None


def source_for(entry: str, environ: Mapping[str, str] | None = None) -> TrackerSource | None:
    """The tracker source a (resolved) pool entry names, or None for a folder of soma records. A folder
    is a tracker by its layout when the pool opens: `mlruns/` (experiment folders with `meta.yaml`) or
    `wandb/` (`run-*` / `offline-run-*` folders)."""
    lower = entry.lower()
    if lower.startswith(("http://", "https://")):
        return __getattr__("TrackingServer")(entry, environ)
    if lower.startswith("sqlite:///"):
        return __getattr__("SqliteStore")(entry[len("sqlite:///"):])
    if is_store(entry):
        return FileStore(entry)
    if is_folder(entry):
        return WandbFolder(entry)
    return None
