"""One tracker run → one soma record mapping (docs/trackers.md has the table), validated by `parse_record`.

Every reader (MLflow file store, SQLite, REST; W&B folders) fills a `Run` with what the tracker holds,
in the tracker's own terms; `run_load` maps it to a soma record *mapping* and sends that through the
loader's record path (`records.parse_record`), so a tracker run is validated, reported and indexed
exactly like a record in a `.json` file: a bad `soma.code` tag or commit is a `validation` problem on
that run, and the other runs load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ..loader import FileLoad, _add_record
from ..problems import NO_PROBLEMS, Problem

#: run states as MLflow (file store: integers 1-5; SQLite/REST: names) and W&B name them → soma statuses (docs/spec.md §1.3)
STATUSES: Mapping[str, str] = {
    "RUNNING": "running", "SCHEDULED": "planned", "FINISHED": "succeeded", "FAILED": "failed",
    "KILLED": "cancelled",
    "1": "running", "2": "planned", "3": "succeeded", "4": "failed", "5": "cancelled",
    "running": "running", "finished": "succeeded", "failed": "failed", "crashed": "crashed",
    "killed": "cancelled", "preempted": "cancelled",
}

SOMA = "soma."  # tags that speak to soma directly: soma.status, soma.conclusion, soma.code, …
#: MLflow's own tag names that become fields (not labels)
NOTE, RUN_NAME, COMMIT, REPO = ("mlflow.note.content", "mlflow.runName", "mlflow.source.git.commit",
                                "mlflow.source.git.repoURL")


@dataclass(slots=True)
class Run:
    """A run as a tracker holds it. Times in milliseconds since the epoch; `tags` are key → value (W&B
    labels have value ""); `params` are MLflow params or W&B config; `metrics` latest values."""

    id: str
    name: str | None = None
    status: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    notes: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    commit: str | None = None
    repo: str | None = None
    url: str | None = None
    origin: str | None = None
    patch: str | None = None  # a file with the run's uncommitted diff (Record.patch)


def record_mapping(run: Run) -> dict[str, Any]:
    """The soma record (docs/spec.md §1.2) a run stands for, before validation."""
    tags = run.tags
    soma: dict[str, str] = {}
    labels: list[str] = []
    for key, value in tags.items():  # one pass: soma's own tags, and the labels (not MLflow's own)
        if key.startswith(SOMA):
            soma[key[len(SOMA):]] = value
        elif not key.startswith("mlflow."):
            labels.append(f"{key}={value}" if value else key)
    notes = run.notes if run.notes is not None else tags.get(NOTE)
    note = notes.strip() if isinstance(notes, str) else ""
    words = " ".join([f"{key}={_word(value)}" for key, value in sorted(run.params.items())])
    text = f"{note}\n\n{words}" if note and words else note or words
    mapping: dict[str, Any] = {
        "id": run.id,
        "name": run.name or tags.get(RUN_NAME) or run.id,
        "status": soma.get("status") or STATUSES.get(str(run.status), run.status),
        "created_at": _moment(run.start_ms),
        "finished_at": _moment(run.end_ms),
        "conclusion": soma.get("conclusion") or (note.splitlines()[0] if note else None),
        "notes": text or None,
        "metrics": _metrics(run.metrics, soma),
        "commit": run.commit or tags.get(COMMIT),
        "repo": run.repo or tags.get(REPO),
        "url": run.url,
        "origin": run.origin,
        "tags": labels or None,
    }
    for key in ("architecture", "code"):
        if soma.get(key):
            mapping[key] = [item.strip() for item in soma[key].split(",") if item.strip()]
    if "importance" in soma:
        mapping["importance"] = _number(soma["importance"])
    return {key: value for key, value in mapping.items() if value is not None}


def run_load(key: str, run: Run, stamp: bytes | None, problems: list[Problem] | None = None) -> FileLoad:
    """The pool's unit for one run: a `FileLoad` at `key` holding its record (or its validation
    problem), with `stamp` (the reader's fingerprint of the run, compared on the next sync)."""
    out = FileLoad(key, stamp=stamp)
    out.problems.extend(problems or ())
    _add_record(out, record_mapping(run), 0)
    if run.patch and out.records:
        out.records[-1] = replace(out.records[-1], patch=run.patch)
    out.problems = out.problems or NO_PROBLEMS
    return out


def _moment(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as an aware datetime (which `parse_record` takes as it is)."""
    if ms is None or ms <= 0:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


def _metrics(latest: Mapping[str, float], soma: Mapping[str, str]) -> dict[str, dict[str, Any]] | None:
    metrics: dict[str, dict[str, Any]] = {}
    for name, value in latest.items():
        metric: dict[str, Any] = {"value": value}
        if f"baseline.{name}" in soma:
            metric["baseline"] = _number(soma[f"baseline.{name}"])
        if f"goal.{name}" in soma:
            metric["goal"] = soma[f"goal.{name}"]
        metrics[name] = metric
    return metrics or None


def _number(text: str) -> float | str:
    """A tag's number; text that is none stays text, so that validation names it."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return text
    return value if math.isfinite(value) else text


def _word(value: Any) -> str:
    """A param or config value as one word of text: `lr=0.0003`, `layers=[4, 8]` loses its spaces, as
    does a list MLflow kept as a string (`betas=(0.9, 0.95)`, a setting `soma_lsp.knobs` reads)."""
    if not isinstance(value, str) or value[:1] in ("[", "(") and value[-1:] in ("]", ")"):
        return "".join(str(value).split())
    return "_".join(value.split()) or '""'
