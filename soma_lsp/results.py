"""The one JSON shape of a result (docs/spec.md §2.8), shared by the CLI, the server's commands and the clients."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .records import Record
from .retrieval import TERMS, ScoredRecord


def rfc3339(when: datetime | None) -> str | None:
    """UTC, `Z`-suffixed; naive datetimes are UTC."""
    if when is None:
        return None
    utc = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    return utc.isoformat().replace("+00:00", "Z")


def location(record: Record) -> dict[str, Any] | None:
    """Where the record was read: a `file:` URI and the 0-based line. A record of a tracker that is not
    a folder (`sqlite:///…#run`, a tracking server's run page) keeps its source as that URI."""
    if record.source is None:
        return None
    path = record.source.path
    uri = path if "://" in path else Path(path).absolute().as_uri()
    return {"uri": uri, "line": record.source.line}


def result_json(scored: ScoredRecord, *, tied: bool | None = None) -> dict[str, Any]:
    """spec §2.8's object; `tied` is added when given (the editor features mark tied records)."""
    record, parts = scored.record, scored.components
    result: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "status": record.status.value,
        "dead_end": scored.dead_end,
        "score": scored.score,
        "components": {term: getattr(parts, term) for term in TERMS},
        "weights": dict(parts.weights),
        "matched_terms": list(parts.matched_terms),
        "shared_components": list(parts.shared_components),
        "headline": record.headline,
        "time": rfc3339(record.time),
        "location": location(record),
        "url": record.url,
    }
    if tied is not None:
        result["tied"] = tied
    return result
