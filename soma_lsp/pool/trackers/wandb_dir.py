"""A W&B folder (`wandb/` holding `run-<stamp>-<id>/` and `offline-run-<stamp>-<id>/` folders).

A run folder's binary log `run-<id>.wandb` (`wandb_log`) holds its name, notes, tags, config, summary,
exit code and git commit — the only place an offline run keeps them. An online run's folder also has
`files/config.yaml` (`key: {value: …}`), `files/wandb-summary.json` and `files/wandb-metadata.json`
(`git.commit`, `git.remote`, `startedAt`); these, being W&B's final word, win over the log. The
`latest-run` symlink is not a run (it would count one twice).

A run's key is its folder; its fingerprint is the stat of the files read, so a scan stats a few files
per run and re-reads only runs that changed. A log this reader cannot follow makes that run a
`tracker` problem naming it ("skipped"), and the other runs load.
"""

from __future__ import annotations

import configparser
import json
import os
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import yaml

from ..loader import YAML_LOADER, FileLoad
from ..problems import Problem
from . import wandb_log
from .mapping import Run, run_load
from .source import FolderSource, Scan, everything, fingerprint, stat_of

PREFIXES = ("run-", "offline-run-")
FILES = ("files/config.yaml", "files/wandb-summary.json", "files/wandb-metadata.json")
SETTINGS = "settings"  # the folder's own W&B settings (`[default] base_url = …`)
CLOUD = "https://api.wandb.ai"
STILL_SECONDS = 300.0  # a log without an exit record unchanged this long: the run crashed


def is_folder(path: str) -> bool:
    """A `wandb/` folder: it holds a `run-*` or `offline-run-*` folder that is not only the symlink."""
    try:
        with os.scandir(path) as entries:
            return any(e.name.startswith(PREFIXES) and e.is_dir(follow_symlinks=False) for e in entries)
    except OSError:
        return False


class WandbFolder(FolderSource):
    kind = "W&B run folder"
    rescan_seconds = 60.0

    def __init__(self, path: str, *, still_seconds: float = STILL_SECONDS) -> None:
        super().__init__(path)
        self.still_seconds = still_seconds

    def scan(self, hint: Iterable[str] | None = None) -> Scan:
        if hint is None:
            names = _runs(self.path)
            covers = everything
        else:
            names = set()
            for path in hint:
                first = os.path.relpath(path, self.path).split(os.sep)[0]
                if first.startswith(PREFIXES):
                    names.add(first)
            keys = {os.path.join(self.path, name) for name in names}
            covers = keys.__contains__
        found = {}
        settings = stat_of(os.path.join(self.path, SETTINGS))
        app = app_url(self.path)
        for name in sorted(names):
            run_dir = os.path.join(self.path, name)
            if os.path.islink(run_dir) or not os.path.isdir(run_dir):
                continue
            files = {rel: stat_of(os.path.join(run_dir, rel)) for rel in (*FILES, _log_name(name))}
            if not any(files.values()):
                continue  # not written yet
            log = files[_log_name(name)]
            still = log is not None and time.time_ns() - log[1] >= self.still_seconds * 1e9
            stamp = fingerprint(sorted(files.items()), settings, still)  # (going still changes the status)
            found[run_dir] = (stamp, lambda run_dir=run_dir, name=name, stamp=stamp, still=still:
                              self._load(run_dir, name, stamp, app, still))
        return Scan(found, covers)

    def _load(self, run_dir: str, name: str, stamp, app: str, still: bool) -> FileLoad:
        run_id = name.rsplit("-", 1)[-1]
        problems: list[Problem] = []
        log = wandb_log.RunLog()
        log_path = os.path.join(run_dir, _log_name(name))
        try:
            with open(log_path, "rb") as f:
                log = wandb_log.read(f.read())
        except FileNotFoundError:
            pass
        except (OSError, wandb_log.LogError) as error:
            out = FileLoad(run_dir, stamp=stamp)
            out.problems.append(Problem(run_dir, 0, "", f"W&B run {run_id} skipped: cannot read its log "
                                        f"{os.path.basename(log_path)}: {error}", "error", "tracker"))
            return out
        config = _config(os.path.join(run_dir, FILES[0]), problems, run_dir) or log.config
        summary = _json(os.path.join(run_dir, FILES[1]), problems, run_dir) or log.summary or log.history
        metadata = _json(os.path.join(run_dir, FILES[2]), problems, run_dir) or {}
        git = metadata.get("git") if isinstance(metadata.get("git"), dict) else {}
        status = None
        if log.exit_code is not None:
            status = "finished" if log.exit_code == 0 else "failed"
        elif os.path.isfile(log_path):
            status = "crashed" if still else "running"
        started = _started(metadata.get("startedAt"))
        project = log.project or "?"
        online = name.startswith("run-") and log.entity and log.project
        run = Run(id=log.id or run_id, name=log.name, status=status,
                  start_ms=started or (log.start_seconds * 1000 if log.start_seconds else None),
                  notes=log.notes, tags={tag: "" for tag in log.tags},
                  params={k: v for k, v in config.items() if not k.startswith("_") and k != "wandb_version"},
                  metrics={k: v for k, v in summary.items() if not k.startswith("_")
                           and isinstance(v, int | float) and not isinstance(v, bool)},
                  commit=git.get("commit") or log.commit, repo=git.get("remote") or log.remote,
                  url="/".join([app, *map(_part, (log.entity, log.project)), "runs", _part(log.id or run_id)])
                  if online else None,
                  origin=f"{self.kind} {self.path} · project {project}",
                  patch=patch if os.path.isfile(patch := os.path.join(run_dir, "files", "diff.patch")) else None)
        return run_load(run_dir, run, stamp, problems)


def app_url(folder: str) -> str:
    """The W&B UI's address for runs logged from `folder`: its `settings` file's `base_url` (the API),
    else W&B's cloud, made the UI's as wandb does it (`api.wandb.ai` → `wandb.ai`, `api.x` → `app.x`,
    anything else — a local server — as it is)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(os.path.join(folder, SETTINGS), encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        pass
    base = parser.get("default", "base_url", fallback="").strip().rstrip("/") or CLOUD
    if "://api.wandb." in base:
        return base.replace("://api.", "://", 1)
    return base.replace("://api.", "://app.", 1)


def _part(text: str) -> str:
    return quote(text, safe="=+&$@")  # (the characters wandb leaves as they are in its run URLs)


def _runs(path: str) -> set[str]:
    try:
        return {name for name in os.listdir(path) if name.startswith(PREFIXES)}
    except OSError:
        return set()


def _log_name(folder: str) -> str:
    return f"run-{folder.rsplit('-', 1)[-1]}.wandb"



def _json(path: str, problems: list[Problem], key: str) -> dict:
    try:
        with open(path, "rb") as f:
            value = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        problems.append(Problem(key, 0, "", f"{os.path.relpath(path, key)} unreadable ({error}); "
                                "read without it", "warning", "tracker"))
        return {}
    return value if isinstance(value, dict) else {}


def _config(path: str, problems: list[Problem], key: str) -> dict[str, Any]:
    """`files/config.yaml`: `key: {desc, value}` entries (safe YAML) → key → value."""
    try:
        with open(path, "rb") as f:
            value = yaml.load(f, Loader=YAML_LOADER)
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as error:
        problems.append(Problem(key, 0, "", f"files/config.yaml unreadable ({str(error).splitlines()[0]}); "
                                "read without it", "warning", "tracker"))
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v.get("value") if isinstance(v, dict) and "value" in v else v for k, v in value.items()
            if isinstance(k, str)}


def _started(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp() * 1000)
