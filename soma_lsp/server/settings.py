"""Typed settings of the server, section `soma` (docs/architecture.md, "Server ↔ clients").

Sources, later ones winning field by field: `initializationOptions`, the `workspace/configuration`
answer for section `soma`, and `workspace/didChangeConfiguration` (when the client cannot be asked).
Every field has a default. A value of the wrong type or out of range is reported (`problems`, which
the server shows with `window/showMessage` and logs) and replaced by the default; unknown keys are
ignored (clients carry their own keys in the same section, e.g. `soma.server.command`, `soma.trace`).

Nested objects and dotted keys are the same thing: `{"hover": {"count": 5}}` = `{"hover.count": 5}`.

Defaults worth knowing:

* `hover.minScore` = 0.5. Without structural evidence the effective weights are lexical 0.53,
  recency 0.20, importance 0.27, so a record with no match at all would still score up to ≈ 0.47
  from importance and recency alone; 0.5 needs a real lexical share on top. On the fixtures a
  weak coincidence scores 0.3–0.45 and the records that bear on a definition 0.5–0.8. Ties pass
  whatever their score (docs/spec.md §3); see `related` for the evidence rule that goes with it.
* `hover.count` = 3: tied records first, then the best ranked, three in all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..pool.cache import MAX_BYTES, UNUSED_DAYS, CacheLimits
from ..query.levers import ALL_ON, Levers
from ..records import kind_of
from ..retrieval import DEFAULT_HALF_LIFE_DAYS, DEFAULT_WEIGHTS, TERMS, Weights

SECTION = "soma"
SEVERITIES = ("warning", "information", "hint", "off")
DEFAULT_MIN_SCORE = 0.5


@dataclass(frozen=True, slots=True)
class Settings:
    pool: tuple[str, ...] | None = None  # None: `.soma/pool` of each workspace folder (or SOMA_POOL)
    weights: Weights = DEFAULT_WEIGHTS
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    hover_count: int = 3
    min_score: float = DEFAULT_MIN_SCORE
    code_lens: bool = True
    dead_end_severity: str = "warning"
    commit_severity: str = "warning"  # dead ends tied through the commit a run ran at (pool.commit_ties)
    snapshot: bool = True  # keep the loaded pool in a snapshot in the cache directory (pool.snapshot)
    poll_seconds: float = 10.0  # how often a tracking server in the pool is asked for new runs (§1.6)
    cache_unused_days: float = UNUSED_DAYS  # cache entries unused this long are removed (pool.cache)
    cache_max_mb: float = MAX_BYTES / 2**20  # … and the least recently used beyond this size
    levers: Levers = ALL_ON  # the retrieval-quality levers (soma_lsp.query.levers), all on
    embedder_url: str = ""  # an HTTP /v1/embeddings service (server.embedder); "" = none
    embedder_model: str = ""  # the `model` it is asked for
    embedder_entry_point: str = ""  # or a Python `module:attribute` embedder
    embedder_weight: float = 0.1  # × cosine, added to a ranked record's standing in find-related

    @property
    def cache_limits(self) -> CacheLimits:
        return CacheLimits(self.cache_unused_days, int(self.cache_max_mb * 2**20))

    def to_json(self) -> dict[str, Any]:
        """The settings in the client's shape (for logs and `soma.poolStatus`)."""
        return {
            "pool": list(self.pool) if self.pool is not None else None,
            "weights": self.weights.as_dict(),
            "halfLifeDays": self.half_life_days,
            "hover": {"count": self.hover_count, "minScore": self.min_score},
            "codeLens": {"enabled": self.code_lens},
            "deadEnds": {"severity": self.dead_end_severity, "commitSeverity": self.commit_severity},
            "snapshot": {"enabled": self.snapshot},
            "pollSeconds": self.poll_seconds,
            "cache": {"unusedDays": self.cache_unused_days, "maxSizeMB": self.cache_max_mb},
            "levers": {name: getattr(self.levers, name) for name in Levers.names()},
            "embedder": {"url": self.embedder_url, "model": self.embedder_model,
                         "entryPoint": self.embedder_entry_point, "weight": self.embedder_weight},
        }


class Invalid(ValueError):
    pass


def _pool(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,) if value.strip() else None
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        paths = tuple(v for v in value if v.strip())
        return paths or None
    raise Invalid(f"expected a path or a list of paths, got {kind_of(value)}")


def _weights(value: Any) -> Weights:
    if value is None:
        return DEFAULT_WEIGHTS
    if not isinstance(value, Mapping):
        raise Invalid(f"expected an object {{{', '.join(TERMS)}}}, got {kind_of(value)}")
    for key, weight in value.items():
        if key in TERMS and (isinstance(weight, bool) or not isinstance(weight, int | float)):
            raise Invalid(f"weights.{key}: expected a number, got {kind_of(weight)}")
    try:
        return Weights.coerce({k: v for k, v in value.items()})
    except (ValueError, TypeError) as error:
        raise Invalid(str(error)) from None


def _number(low: float, high: float = math.inf, *, low_open: bool = False,
            integer: bool = False) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(f"expected a number, got {kind_of(value)}")
        if integer and value != int(value):
            raise Invalid(f"expected a whole number, got {value!r}")
        if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
            bound = f"> {low}" if low_open else f">= {low}"
            raise Invalid(f"expected a number {bound}" + (f" and <= {high}" if high != math.inf else "")
                          + f", got {value!r}")
        return int(value) if integer else float(value)
    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"expected true or false, got {kind_of(value)}")
    return value


def _levers(value: Any) -> Levers:
    """`{"noise": false, ...}`: the named levers switched; the others stay on."""
    if not isinstance(value, Mapping):
        raise Invalid(f"expected an object {{{', '.join(Levers.names())}}}, got {kind_of(value)}")
    for name, on in value.items():
        if name not in Levers.names():
            raise Invalid(f"unknown lever {name!r} (known: {', '.join(Levers.names())})")
        if not isinstance(on, bool):
            raise Invalid(f"levers.{name}: expected true or false, got {kind_of(on)}")
    return Levers(**dict(value))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {kind_of(value)}")
    return value.strip()


def _url(value: Any) -> str:
    text = _text(value)
    if text and not text.lower().startswith(("http://", "https://")):
        raise Invalid(f"expected an http:// or https:// URL, got {value!r}")
    return text


_ENTRY_POINT = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _entry_point(value: Any) -> str:
    text = _text(value)
    if text and not _ENTRY_POINT.fullmatch(text):
        raise Invalid(f"expected module:attribute (e.g. soma_lsp.server.embedder:wordllama), got {value!r}")
    return text


def _severity(value: Any) -> str:
    if not isinstance(value, str) or value.strip().lower() not in SEVERITIES:
        raise Invalid(f"expected one of {', '.join(SEVERITIES)}, got {value!r}")
    return value.strip().lower()


# setting key (dotted, as clients spell it) → (Settings field, validator)
FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "pool": ("pool", _pool),
    "weights": ("weights", _weights),
    "halfLifeDays": ("half_life_days", _number(0.0, low_open=True)),
    "hover.count": ("hover_count", _number(1, 50, integer=True)),
    "hover.minScore": ("min_score", _number(0.0, 1.0)),
    "codeLens.enabled": ("code_lens", _boolean),
    "snapshot.enabled": ("snapshot", _boolean),
    "deadEnds.severity": ("dead_end_severity", _severity),
    "deadEnds.commitSeverity": ("commit_severity", _severity),
    "pollSeconds": ("poll_seconds", _number(1.0)),
    "cache.unusedDays": ("cache_unused_days", _number(0.0, low_open=True)),
    "cache.maxSizeMB": ("cache_max_mb", _number(1.0)),
    "levers": ("levers", _levers),
    "embedder.url": ("embedder_url", _url),
    "embedder.model": ("embedder_model", _text),
    "embedder.entryPoint": ("embedder_entry_point", _entry_point),
    "embedder.weight": ("embedder_weight", _number(0.0, 1.0)),
}
_LEAVES = {"weights", "levers"}  # objects that are one value, not a group of keys


def flatten(raw: Any, prefix: str = "") -> dict[str, Any]:
    """`{"hover": {"count": 3}}` → `{"hover.count": 3}`; known object-valued keys stay whole."""
    out: dict[str, Any] = {}
    if not isinstance(raw, Mapping):
        return out
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in _LEAVES and name not in FIELDS:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def section_of(raw: Any) -> Any:
    """Accept either the `soma` section itself or an object holding it (`{"soma": {...}}`)."""
    if isinstance(raw, Mapping) and isinstance(raw.get(SECTION), Mapping):
        return raw[SECTION]
    return raw


def parse(*sources: Any) -> tuple[Settings, list[str]]:
    """Settings from the sources (later wins per key) and the problems found, one line each."""
    merged: dict[str, Any] = {}
    for source in sources:
        merged.update(flatten(section_of(source)))
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, (name, check) in FIELDS.items():
        if key not in merged:
            continue
        try:
            values[name] = check(merged[key])
        except Invalid as error:
            default = getattr(Settings(), name)
            shown = default.as_dict() if isinstance(default, Weights) else default
            problems.append(f"soma.{key}: {error}; using the default ({_show(shown)})")
    return replace(Settings(), **values), problems


def _show(value: Any) -> str:
    if value is None:
        return "the workspace's .soma/pool"
    if value == "":
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Levers):
        return ", ".join(f"{name} {_show(getattr(value, name))}" for name in Levers.names())
    return str(value)


__all__ = ["DEFAULT_MIN_SCORE", "FIELDS", "SECTION", "SEVERITIES", "Settings", "flatten", "parse",
           "section_of"]
