"""Word forms (issue 20, lever `forms`): one word as code and notes spell it differently.

The code says `normalize_advantages`, `kernel_initializer`, `pool_type`; the notes say "advantage
normalisation", "initialised", "average pooling". §2.1's tokenizer has no stemming (the core's
ranking is exact and stays so), so the server asks for the other forms of the words near the cursor
itself (`soma_lsp.server.evidence.with_forms`, which keeps those the pool holds): `root` strips one inflection or derivation suffix (and reads British `-is-` as `-iz-`),
and `forms` lists the spellings that share a word's root. The rules are a handful of English
suffixes, not a full stemmer: enough for -s/-es/-ed/-ing/-er/-ation/-ly and the -ise/-ize pairs that
ML notes and code disagree on, with a root of at least `MIN_ROOT` letters so that short words
(`lay`, `ear`) are never reached.
"""

from __future__ import annotations

from functools import lru_cache

#: Letters a root keeps at least: `layers` → `layer`, not `lay`.
MIN_ROOT = 4
#: Suffixes stripped, longest first; `e` makes `normalize`/`normalized` one root.
SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ies", "ied", "es", "ed", "ly", "s", "e", "")
#: The endings `forms` tries on a root (with its last consonant doubled for -ing/-ed/-er).
ENDINGS = ("", "e", "s", "es", "ed", "d", "ing", "ings", "er", "ers", "ation", "ations", "ly", "ies", "ied", "y")
_VOWELS = frozenset("aeiou")
_DOUBLED = ("ing", "ed", "er", "ers")


@lru_cache(maxsize=65_536)
def root(term: str) -> str:
    """The root of a lower-case alphabetic term (itself when it is short, holds a digit, or has no
    suffix to strip): `normalisation`, `normalized` → `normaliz`; `clipping` → `clip`."""
    if len(term) <= MIN_ROOT or not term.isalpha():
        return term
    for suffix in SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= MIN_ROOT:
            base = term[: len(term) - len(suffix)]
            if suffix in ("ies", "ied"):
                base += "y"
            break
    if len(base) > MIN_ROOT and base[-1] == base[-2] and base[-1] not in _VOWELS and base[-1] not in "lsz":
        base = base[:-1]  # clipp(ing) → clip, embedd(ing) → embed
    if base.endswith("is") and len(base) >= MIN_ROOT + 2:
        base = base[:-2] + "iz"  # normalis(ation) → normaliz
    return base


@lru_cache(maxsize=65_536)
def forms(term: str) -> tuple[str, ...]:
    """The other spellings of `term` that share its root (`normalize` → `normalise`,
    `normalisation`, `normalized`, …), the term itself left out; empty for a term without a root."""
    if len(term) < MIN_ROOT or not term.isalpha():
        return ()
    base = root(term)
    stems = {base}
    if base.endswith("iz"):
        stems.add(base[:-2] + "is")
    candidates = []
    for stem in sorted(stems):
        candidates += [stem + ending for ending in ENDINGS]
        if stem[-1] not in _VOWELS and stem[-1] not in "wxy":
            candidates += [stem + stem[-1] + ending for ending in _DOUBLED]
        if stem.endswith("y"):
            candidates += [stem[:-1] + ending for ending in ("ies", "ied")]
    return tuple(c for c in dict.fromkeys(candidates) if c != term and root(c) == base)


__all__ = ["MIN_ROOT", "forms", "root"]
