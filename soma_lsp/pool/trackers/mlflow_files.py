"""An MLflow file store (`mlruns/`), read from its folders (MLflow 3 opens it only behind
`MLFLOW_ALLOW_FILE_STORE`; the folders are still on many disks).

Layout: `<exp_id>/meta.yaml` (name, lifecycle_stage), `<exp_id>/<run_id>/meta.yaml` (run_id, run_name,
status as an integer, start_time, end_time in ms, lifecycle_stage), and under the run `params/<key>`,
`tags/<key>` (the raw value; a key with `/` is nested folders), `metrics/<key>` (`<ms> <value> <step>`
lines). Deleted experiments and runs (`lifecycle_stage: deleted`, `.trash/`) are not records.

A run's key is its `meta.yaml`; its fingerprint is the (path, size, mtime, inode) of every file of the
run and of its experiment's `meta.yaml`, so a scan stats files and reads only the runs that changed.
A folder event names the runs to scan (`hint`: changed paths); None scans the whole store.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import yaml

from ..loader import YAML_LOADER, FileLoad
from ..problems import Problem
from .mapping import Run, run_load
from .source import FolderSource, Scan, Stamp, everything, fingerprint, stat_of

META = "meta.yaml"
PARTS = ("params", "tags", "metrics")


def is_store(path: str) -> bool:
    """An `mlruns/` layout: a visible sub-folder whose `meta.yaml` names an `experiment_id`."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                found = is_experiment(entry.path)
                if found is not None:
                    return found
    except OSError:
        return False
    return False


def is_experiment(folder: str) -> bool | None:
    """Whether `folder/meta.yaml` names an `experiment_id`; None when there is no such file."""
    try:
        with open(os.path.join(folder, META), "rb") as f:
            return b"experiment_id" in f.read(65536)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError:
        return False


class FileStore(FolderSource):
    kind = "MLflow file store"

    def scan(self, hint: Iterable[str] | None = None) -> Scan:
        runs: dict[str, tuple[Stamp, Any]] = {}
        if hint is None:
            for experiment in self._experiments():
                self._scan_experiment(experiment, runs)
            return Scan(runs, everything)
        experiments, run_dirs = set(), set()
        for path in hint:
            parts = os.path.relpath(path, self.path).split(os.sep)
            if parts[0] in (".", "..") or parts[0].startswith("."):
                continue
            experiment = os.path.join(self.path, parts[0])
            if len(parts) == 1 or parts[1] == META:
                experiments.add(experiment)
            elif not parts[1].startswith("."):  # (hidden folders are no runs, as in a full scan)
                run_dirs.add(os.path.join(experiment, parts[1]))
        for experiment in experiments:
            self._scan_experiment(experiment, runs)
        for run_dir in run_dirs - {os.path.join(e, r) for e in experiments for r in _listdir(e)}:
            experiment = os.path.dirname(run_dir)
            meta = _meta(os.path.join(experiment, META))
            if isinstance(meta, dict) and meta.get("lifecycle_stage") != "deleted":
                self._scan_run(experiment, meta, run_dir, runs)
        prefixes = tuple(e + os.sep for e in experiments)
        keys = {os.path.join(r, META) for r in run_dirs}
        return Scan(runs, lambda key: key in keys or key.startswith(prefixes))

    def _experiments(self) -> list[str]:
        return [os.path.join(self.path, name) for name in sorted(_listdir(self.path)) if not name.startswith(".")
                and os.path.isfile(os.path.join(self.path, name, META))]

    def _scan_experiment(self, experiment: str, runs: dict) -> None:
        meta = _meta(os.path.join(experiment, META))
        if not isinstance(meta, dict) or meta.get("lifecycle_stage") == "deleted":
            return
        for name in sorted(_listdir(experiment)):
            run_dir = os.path.join(experiment, name)
            if not name.startswith(".") and os.path.isdir(run_dir):
                self._scan_run(experiment, meta, run_dir, runs)

    def _scan_run(self, experiment: str, experiment_meta: dict, run_dir: str, runs: dict) -> None:
        key = os.path.join(run_dir, META)
        files = _files(run_dir)
        if META not in files:  # not a run (yet): MLflow writes meta.yaml right after the folder
            return
        stamp = fingerprint(stat_of(os.path.join(experiment, META)), sorted(files.items()))
        runs[key] = (stamp, lambda: self._load(key, run_dir, experiment_meta, stamp))

    def _load(self, key: str, run_dir: str, experiment_meta: dict, stamp: Stamp) -> FileLoad | None:
        meta = _meta(key)
        if not isinstance(meta, dict):
            out = FileLoad(key, stamp=None)
            out.problems.append(Problem(key, 0, "", f"incomplete MLflow run folder (meta.yaml: {meta}); "
                                        "skipped until MLflow finishes writing it", "warning", "tracker"))
            return out
        if meta.get("lifecycle_stage") == "deleted":
            return None
        experiment = experiment_meta.get("name") or experiment_meta.get("experiment_id")
        run = Run(id=str(meta.get("run_id") or meta.get("run_uuid") or os.path.basename(run_dir)),
                  name=meta.get("run_name") or None, status=str(meta.get("status", "")) or None,
                  start_ms=_int(meta.get("start_time")), end_ms=_int(meta.get("end_time")),
                  tags=_values(run_dir, "tags"), params=_values(run_dir, "params"),
                  metrics=_latest(run_dir), origin=f"{self.kind} {self.path} · experiment {experiment}")
        return run_load(key, run, stamp)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []



def _files(run_dir: str) -> dict[str, tuple[int, ...] | None]:
    """The run's meta.yaml and every params/tags/metrics file, relative path → its stat."""
    found = {}
    if os.path.isfile(os.path.join(run_dir, META)):
        found[META] = stat_of(os.path.join(run_dir, META))
    for part in PARTS:
        for path in _files_below(os.path.join(run_dir, part)):
            found[os.path.relpath(path, run_dir)] = stat_of(path)
    return found


def _files_below(top: str):
    """Every file under `top` (hidden folders skipped), as paths."""
    for directory, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            yield os.path.join(directory, name)


def _meta(path: str) -> dict | str:
    """The parsed meta.yaml, or what is wrong with it (a string)."""
    try:
        with open(path, "rb") as f:
            value = yaml.load(f, Loader=YAML_LOADER)
    except FileNotFoundError:
        return "missing"
    except (OSError, yaml.YAMLError) as error:
        return f"unreadable: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
    return value if isinstance(value, dict) else "not a mapping"


def _values(run_dir: str, part: str) -> dict[str, str]:
    """params/ or tags/: key (nested folders joined with `/`) → the file's text."""
    top = os.path.join(run_dir, part)
    values = {}
    for path in _files_below(top):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                values[os.path.relpath(path, top).replace(os.sep, "/")] = f.read()
        except OSError:
            continue
    return values


def _latest(run_dir: str) -> dict[str, float]:
    """Each metric's latest value: the line with the greatest (step, timestamp), as MLflow decides."""
    latest = {}
    for key, text in _values(run_dir, "metrics").items():
        best = None
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 2:
                continue  # a line being written
            try:
                value = float(fields[1])
                order = (int(fields[2]) if len(fields) > 2 else 0, int(fields[0]))
            except ValueError:
                continue
            if best is None or order >= best[0]:
                best = (order, value)
        if best is not None:
            latest[key] = best[1]
    return latest


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
