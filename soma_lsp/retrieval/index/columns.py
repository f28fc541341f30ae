"""Per-slot columns: what ranking needs of every record besides its postings, as numpy arrays
indexed by slot (a removed record's slot stays, `alive` False, until a compaction renumbers them)."""

from __future__ import annotations

import numpy as np


class _Columns:
    """Per-slot numpy columns that grow by doubling."""

    FIELDS = {"alive": bool, "dl": np.float64, "time": np.float64, "importance": np.float64,
              "arch_total": np.float64, "dead_end": bool}

    def __init__(self) -> None:
        self.size = 0
        for name, dtype in self.FIELDS.items():
            setattr(self, name, np.zeros(0, dtype=dtype))

    def grow(self, extra: int) -> np.ndarray:
        start, self.size = self.size, self.size + extra
        capacity = self.alive.size
        if self.size > capacity:
            new_capacity = max(self.size, 2 * capacity, 1024)
            for name in self.FIELDS:
                old = getattr(self, name)
                new = np.zeros(new_capacity, dtype=old.dtype)
                new[:capacity] = old
                setattr(self, name, new)
        return np.arange(start, self.size, dtype=np.int64)

    def view(self, name: str) -> np.ndarray:
        return getattr(self, name)[: self.size]
