"""A brute-force, loop-per-record reading of docs/spec.md §2, written from the spec text alone.

It shares nothing with `soma_lsp.retrieval` but the record type, so the vectorised index can be
checked against it on generated pools.
"""

from __future__ import annotations

import math
from datetime import timezone

K1, B = 1.2, 0.75
WEIGHTS = {"lexical": 0.40, "structural": 0.25, "recency": 0.15, "importance": 0.20}


def tokenize(text):
    runs, current = [], ""
    for ch in text:
        if ch.isalnum():
            current += ch
        else:
            if current:
                runs.append(current)
            current = ""
    if current:
        runs.append(current)
    terms = []
    for run in runs:
        parts, start = [], 0
        for i in range(1, len(run)):
            upper, prev_lower = run[i].isupper(), run[i - 1].islower()
            next_lower = i + 1 < len(run) and run[i + 1].islower()
            if upper and (prev_lower or (run[i - 1].isupper() and next_lower)):
                parts.append(run[start:i])
                start = i
        parts.append(run[start:])
        terms += [p.lower() for p in parts]
        if len(parts) > 1:
            terms.append(run.lower())
    return terms


def document(r):
    return (tokenize(r.name) * 3 + tokenize(r.headline or "") * 2 + tokenize(r.notes or "")
            + tokenize(r.details or ""))


def canonical(name):
    tail = name.split(".")[-1].lower()
    return "".join(c for c in tail if c.isalnum())


def bag(arch):
    out = {}
    if not arch:
        return out
    pairs = arch.items() if isinstance(arch, dict) else [(a, 1.0) if isinstance(a, str) else a for a in arch]
    for name, count in pairs:
        c = canonical(name)
        if c and count > 0:
            out[c] = out.get(c, 0.0) + count
    return out


def dead_end(r):
    if r.status.value in ("failed", "crashed", "regressed"):
        return True
    judged = []
    for m in r.metrics:
        if m.baseline is not None and m.goal is not None:
            if not math.isfinite(m.value):
                judged.append(True)
            else:
                judged.append(m.value < m.baseline if m.goal == "max" else m.value > m.baseline)
    return bool(judged) and all(judged)


def importance(r):
    if r.importance is not None:
        base = r.importance
    else:
        eff = 0.0
        for m in r.metrics:
            if m.baseline is None:
                continue
            if not (math.isfinite(m.value) and math.isfinite(m.baseline)):
                eff = 1.0
                break
            eff = max(eff, abs(m.value - m.baseline) / max(abs(m.baseline), 1e-12) / 0.10)
        eff = min(1.0, eff)
        base = 0.5 * bool(r.headline) + 0.2 * bool(r.notes or r.details) + 0.3 * eff
    return max(base, 0.8) if dead_end(r) and r.headline else base


def utc(d):
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def rank(records, text="", architecture=None, now=None, half_life=30.0, limit=10, weights=WEIGHTS):
    docs = [document(r) for r in records]
    n = len(records)
    avgdl = sum(len(d) for d in docs) / n if n else 0
    qterms = list(dict.fromkeys(tokenize(text)))
    raw = []
    for d in docs:
        s = 0.0
        for t in qterms:
            tf = d.count(t)
            if tf:
                nt = sum(1 for e in docs if t in e)
                idf = math.log(1 + (n - nt + 0.5) / (nt + 0.5))
                s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(d) / avgdl))
        raw.append(s)
    top = max(raw, default=0.0)
    qbag = bag(architecture)
    out = []
    for r, d, b25 in zip(records, docs, raw):
        comp = {"lexical": (b25 / top if top > 0 else 0.0) if qterms else None}
        rbag = bag(r.architecture)
        if qbag and rbag:
            keys = set(qbag) | set(rbag)
            comp["structural"] = (sum(min(qbag.get(k, 0), rbag.get(k, 0)) for k in keys)
                                  / sum(max(qbag.get(k, 0), rbag.get(k, 0)) for k in keys))
        else:
            comp["structural"] = None
        t = r.finished_at or r.created_at
        if now is not None and t is not None:
            age = (utc(now) - utc(t)).total_seconds() / 86400
            comp["recency"] = 1.0 if age <= 0 else 2 ** (-age / half_life)
        else:
            comp["recency"] = None
        comp["importance"] = importance(r)
        total = sum(weights[k] for k, v in comp.items() if v is not None)
        eff = {k: (weights[k] / total if v is not None and total > 0 else 0.0) for k, v in comp.items()}
        score = sum(eff[k] * v for k, v in comp.items() if v is not None)
        out.append((score, r.id, comp, eff, [t for t in qterms if t in d]))
    out.sort(key=lambda x: (-x[0], x[1]))
    return out if limit is None else out[:limit]
