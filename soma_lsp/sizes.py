"""A byte count as people read it (`1.5 MiB`): one way for the loading progress and `soma-lsp cache`.

Binary units, named as such: both count in 1024s, and a size labelled `MB` would be 5% off.
"""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB")


def size_text(n: float) -> str:
    """`512 B`, `1.5 KiB`, … `3072.0 GiB`: whole bytes, else one decimal of the largest unit that fits."""
    unit = 0
    while n >= 1024 and unit < len(UNITS) - 1:
        n /= 1024
        unit += 1
    return f"{n:.0f} B" if unit == 0 else f"{n:.1f} {UNITS[unit]}"
