"""The run ids of a chunk's split text, most runs found without a Python object each.

`documents.DocumentCounter` maps every run of its documents' text (as written, UTF-8) to an id. As
`bytes.split` and a dictionary lookup per run, that is two Python operations on each of the ≈ 9M runs of
a 100k-record pool (64 and 59 ns each, measured on its notes): half of counting its terms, in the
counting child on the first load's critical path. But runs are short — 95% of those runs are at most
16 bytes — so here such a run is read as two 64-bit integers, its bytes little-endian and zero-padded
(a run has no zero byte: two runs read alike only if they are the same run), and looked up in an
open-addressing table of numpy arrays, every run of the chunk at once. Only the longer runs, and a
short run the table does not hold yet, go through the dictionary — in the order they come, so each
new run gets the id, and its terms the keys, that looking up every run in order gives."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat

import numpy as np

SPACE = 32  # what separates runs in the text given (every other separator translated to it)
WORD = 8  # bytes of an integer
SHORT = 2 * WORD  # a run of at most this many bytes is read as two integers
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(WORD)] + [(1 << 64) - 1], dtype=np.uint64)  # by length
_SPREAD, _MIX = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F  # Fibonacci hashing: the high bits of key × _SPREAD
_FULL = (1 << 64) - 1
_PAD = bytes(SHORT)
TABLE_BYTES = 32 << 10  # a shorter text is split and looked up run by run: the ~30 numpy calls' fixed cost
# outweighs what they save (a chunk's names or headlines, 8–20 KB, went 20–50% slower through the table)


class ShortRunTable:
    """Short run (as two integers) → run id, for the runs seen so far; ids come from a dictionary of
    runs (as bytes) that stays the authority: the table only remembers its answers."""

    def __init__(self) -> None:
        self._bits = 10
        self._low = np.zeros(1 << self._bits, dtype=np.uint64)  # a run's first 8 bytes; 0: an empty slot
        self._high = np.zeros(1 << self._bits, dtype=np.uint64)  # its next 8
        self._ids = np.zeros(1 << self._bits, dtype=np.int64)
        self._held = 0  # runs in the table

    def run_ids(self, text: bytes, ids: Mapping[bytes, int]) -> np.ndarray:
        """The id of each run of `text` (runs of bytes other than `SPACE`; no zero byte, which would
        read as padding), in order; `ids[run]` gives a run's id (a run not seen before gets one there)."""
        if len(text) < TABLE_BYTES:  # (no other whitespace: `bytes.split` splits at SPACE alone)
            return np.fromiter(map(ids.__getitem__, text.split()), dtype=np.int64)
        data = np.frombuffer(text, dtype=np.uint8)
        edges = np.flatnonzero(np.diff(data != SPACE, prepend=False, append=False))
        starts, ends = edges[0::2], edges[1::2]
        lengths = ends - starts
        windows = np.ndarray((len(text) + WORD,), dtype="<u8", buffer=text + _PAD, strides=(1,))  # 8 bytes from each
        in_low = np.minimum(lengths, WORD)
        low = windows[starts] & _MASKS[in_low]
        high = windows[starts + WORD] & _MASKS[np.minimum(lengths - in_low, WORD)]
        short = lengths <= SHORT
        found = np.full(starts.size, -1, dtype=np.int64)
        self._look_up(low, high, np.flatnonzero(short), found)
        long = np.flatnonzero(~short)
        if long.size:  # (-1: not seen before)
            found[long] = np.fromiter(map(ids.get, map(text.__getitem__, map(slice, starts[long].tolist(),
                                                                                 ends[long].tolist())), repeat(-1)),
                                      dtype=np.int64, count=long.size)
        missing = np.flatnonzero(found < 0)
        for i, start, end, is_short, key in zip(missing.tolist(), starts[missing].tolist(), ends[missing].tolist(),
                                                short[missing].tolist(), zip(low[missing].tolist(), high[missing].tolist())):
            found[i] = run_id = ids[text[start:end]]  # (in order: new runs get their ids as they come)
            if is_short:
                self._insert(*key, run_id)
        return found

    def _look_up(self, low: np.ndarray, high: np.ndarray, pending: np.ndarray, found: np.ndarray) -> None:
        """`found[i]` = the id of run (`low[i]`, `high[i]`), for each i of `pending` the table holds
        (linear probing, every key a step at a time)."""
        mask = (1 << self._bits) - 1
        low, high = low[pending], high[pending]
        slots = (((low ^ (high * np.uint64(_MIX))) * np.uint64(_SPREAD)) >> np.uint64(64 - self._bits)).astype(np.intp)
        while pending.size:
            held = self._low[slots]
            hit = (held == low) & (self._high[slots] == high)
            found[pending[hit]] = self._ids[slots[hit]]
            going_on = ~hit & (held != 0)
            pending, slots, low, high = pending[going_on], (slots[going_on] + 1) & mask, low[going_on], high[going_on]

    def _insert(self, low: int, high: int, run_id: int) -> None:
        """Hold (`low`, `high`) → `run_id` (nothing when it is held already)."""
        if self._place(low, high, run_id):
            self._held += 1
            if 2 * self._held > self._ids.size:  # at most half full: probes stay short
                held = np.flatnonzero(self._low)
                runs = zip(self._low[held].tolist(), self._high[held].tolist(), self._ids[held].tolist())
                self._bits += 1
                self._low, self._high, self._ids = (np.zeros(1 << self._bits, dtype=a.dtype)
                                                    for a in (self._low, self._high, self._ids))
                for run in runs:
                    self._place(*run)

    def _place(self, low: int, high: int, run_id: int) -> bool:
        """Put the run in its slot or the first free one after; False when it is there already."""
        mask = (1 << self._bits) - 1
        slot = (((low ^ ((high * _MIX) & _FULL)) * _SPREAD) & _FULL) >> (64 - self._bits)
        while self._low[slot]:
            if self._low[slot] == low and self._high[slot] == high:
                return False
            slot = (slot + 1) & mask
        self._low[slot], self._high[slot], self._ids[slot] = low, high, run_id
        return True
