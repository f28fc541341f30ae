"""docs/spec.md §2.1 tokenization: alphanumeric runs, split at case changes, lower-cased, whole run kept too.

`tokenize` emits terms in the spec's order (used for queries, whose first-seen order explains a
match). `document_terms` yields the same bag in another order, faster: for ASCII text it lower-cases
and splits the whole text in C, looking at single runs only where an upper-case letter inside one may
split it. The index no longer calls it (`documents` splits whole chunks of records at once); it is the
tokenizer `bench/rank.py` gives the bm25s baseline, so that the baseline is not slowed by ours.
"""

from __future__ import annotations

import re

# Shared with `documents`, which splits whole chunks of text the same way:
RUN = re.compile(r"[^\W_]+")  # maximal runs of str.isalnum() characters
ASCII_SEPARATORS = str.maketrans({chr(i): " " for i in range(128) if not chr(i).isalnum()})  # for ASCII text
# For ASCII, "upper-case" is [A-Z] and "lower-case" [a-z]: a split point lies before an upper-case
# letter that follows a lower-case one, or that follows an upper-case one and precedes a lower-case one.
_SPLIT_POINT = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def split_run(run: str) -> list[str]:
    """Split one alphanumeric run before i when c[i] is upper and c[i-1] lower, or when c[i] and
    c[i-1] are upper and c[i+1] lower (`HTTPServer` → HTTP|Server). Digits never split."""
    if run.isascii():
        return _SPLIT_POINT.sub(" ", run).split()
    if run.islower() or not any(c.isupper() for c in run) or run.isupper():
        return [run]
    parts, start, last = [], 0, len(run) - 1
    for i in range(1, len(run)):
        c = run[i]
        if not c.isupper():
            continue
        prev = run[i - 1]
        if prev.islower() or (prev.isupper() and i < last and run[i + 1].islower()):
            parts.append(run[start:i])
            start = i
    parts.append(run[start:])
    return parts


def is_plain(run: str) -> bool:
    """Whether a run is its own only term: ASCII without capitals (most runs: numbers, lower-case
    words), so neither splitting nor lower-casing can change it."""
    return run.isascii() and (run.islower() or run.isdigit())


def _runs(text: str) -> list[str]:
    return text.translate(ASCII_SEPARATORS).split() if text.isascii() else RUN.findall(text)


def tokenize(text: str) -> list[str]:
    """Terms of `text` in order: each part of each run lower-cased, then the whole run when it split."""
    terms: list[str] = []
    for run in _runs(text):
        if is_plain(run):
            terms.append(run)
            continue
        parts = split_run(run)
        if len(parts) == 1:
            terms.append(run.lower())
        else:
            terms.extend(p.lower() for p in parts)
            terms.append(run.lower())
    return terms


def document_terms(text: str) -> list[str]:
    """The bag of `tokenize(text)`: every run lower-cased, then the parts of the runs that split."""
    if not text.isascii():
        return tokenize(text)
    spaced = text.translate(ASCII_SEPARATORS)
    lowered = spaced.lower()
    terms = lowered.split()
    if lowered == spaced:  # no upper-case letter: no run can split
        return terms
    parts: list[str] = []
    for run, low in zip(spaced.split(), terms):
        # only a run with an upper-case letter after its first character can split
        if run != low and run[1:] != low[1:] and not run.isupper():
            pieces = _SPLIT_POINT.sub(" ", run).lower().split()
            if len(pieces) > 1:
                parts += pieces
    terms += parts
    return terms
