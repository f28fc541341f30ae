"""Knob settings written in a record's text: `lr=3e-3`, `rope_theta = 1000000`, `warmup=2k`.

Researchers write the settings a run differed in as `key=value` words in its name, notes or
conclusion, and trackers keep them as params. Two runs, or a run and a line of code, set the same
knob to the same value when their keys match and their values are equal — as numbers where both
read as numbers (`1e6` = `1_000_000` = `1000000`), else as text, case-insensitively. A value may be a
flat list or tuple of such items (`betas=(0.9, 0.95)`, `depths: [3, 3, 9, 3]`): equal item by item
whatever the brackets and spacing, never equal to a single value.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

#: A list or tuple value, flat and at most 64 characters (a nested or longer one is no setting);
#: no `=` or `:` inside, so that `best: (lr=3e-4, wd=0.1)` still reads `lr` and `wd`.
_SEQUENCE = r"[\[(][^\[\](){}\n=:]{0,62}[\])]"
_SETTING = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_.\-]{0,63})\s*[=:]\s*"
                      rf"([^\s,;()\[\]{{}}]{{1,64}}|{_SEQUENCE})")
#: An item of a list value: a number or a bare word, or a quoted word without commas.
_ITEM = re.compile(r"[\w.+\-]{1,64}|'[^',]*'|\"[^\",]*\"")
MAX_ITEMS = 16
_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9}


def canonical_value(value: str) -> str:
    """A knob's value in one spelling: numbers as Python's shortest float repr (`1e6` → `1000000.0`),
    `2k` → `2000.0`, text lower-cased and stripped of quotes and a trailing full stop."""
    text = value.strip().strip("'\"").rstrip(".").lower()
    number = text.replace("_", "")
    scale = 1.0
    if number[-1:] in _SUFFIX and number[:-1]:
        number, scale = number[:-1], _SUFFIX[number[-1]]
    try:
        parsed = float(number) * scale
    except ValueError:
        return text
    return repr(parsed) if math.isfinite(parsed) else text


def setting_value(value: str) -> str | None:
    """A setting's value in one spelling (`canonical_value`); a list or tuple as its canonical
    items in brackets (`(0.9, 0.95)`, `[0.9,0.95]` → `[0.9, 0.95]`, `(0.5,)` → `[0.5]`), None when
    it is no flat list of at most MAX_ITEMS items (`(0.5)` is a number in parentheses: None too)."""
    if value[:1] not in ("[", "("):
        return canonical_value(value)
    items = _items(value)
    return None if items is None else "[" + ", ".join(map(canonical_value, items)) + "]"


def _items(value: str) -> list[str] | None:
    """The items of a bracketed value (`[a, b]`, `(a, b)`, `(a,)`), None for anything else."""
    if (value[:1], value[-1:]) not in (("[", "]"), ("(", ")")):
        return None
    items = [item.strip() for item in value[1:-1].split(",", MAX_ITEMS + 1)]
    if len(items) == 1 and value[0] == "(":
        return None  # no comma: a value in parentheses, not a tuple
    if len(items) > 1 and not items[-1]:
        items.pop()  # a trailing comma: `(0.5,)`, `[1, 2,]`
    if len(items) > MAX_ITEMS or not all(_ITEM.fullmatch(item) for item in items):
        return None
    return items


class Knob(NamedTuple):
    """One setting: `value` compares (canonical), `text` is how it was written."""

    value: str
    text: str


def knob_settings(text: str | None) -> dict[str, Knob]:
    """The `key=value` (or `key: value`) settings in `text` by lower-cased key (the last one wins
    when a key repeats)."""
    if not text or ("=" not in text and ":" not in text):  # (the pattern's scan costs ~0.4 ms a record;
        return {}                                              # most prose has neither sign)
    found = {}
    for key, value in _SETTING.findall(text):
        canonical = setting_value(value)
        if canonical is not None:
            found[key.lower()] = Knob(canonical, value)
    return found


# `rope_theta: float = 1_000_000.0`, `config.ema_decay = 0.9999`, `lr=3e-4` in a call
# (possessive runs of blanks, an annotation of at most 128 characters: `\s*(?::\s*[…]+?)?\s*=` let three parts take
# the same blanks, and `x:` followed by 4,000 spaces took 44 s — with the interpreter's lock held)
_ASSIGNED = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w{0,63})[ \t]*+(?::[ \t]*+[\w.\[\], |]{1,128}?)?[ \t]*+=(?!=)[ \t]*+"
                       rf"([^\s,;()\[\]{{}}#]{{1,64}}|{_SEQUENCE})")


def line_settings(line: str, config: bool = False) -> dict[str, Knob]:
    """The settings a line of code or config makes: `key=value` and `key: value` as in
    `knob_settings`, plus annotated and attribute assignments (`rope_theta: float = 1e6`,
    `config.ema_decay = 0.9999` → `ema_decay`). In code a value that is itself a name (`= theta`) is
    no setting; in a config file (`config`) a bare word is a value like any other (`prediction: v`,
    `beta_schedule: cosine` are YAML strings)."""
    code = line.split("#", 1)[0] if "=" in line or config else line
    found = {k: v for k, v in knob_settings(code).items() if config or _literal(v.text)}
    for key, value in _ASSIGNED.findall(code):
        canonical = setting_value(value)
        if canonical is not None and _literal(value):
            found[key.lower()] = Knob(canonical, value)
    return found


def _literal(value: str) -> bool:
    """A number, or a quoted or bare word value that is not an identifier of code; a list or tuple
    of them (`(4, 4)`, not `(h, w)`)."""
    items = _items(value)
    if items is not None:
        return all(map(_literal, items))
    text = value.strip()
    if text[:1] in "'\"":
        return True
    try:
        float(canonical_value(text))
    except ValueError:
        return text.lower() in ("true", "false")
    return True
