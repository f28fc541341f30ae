"""Export and restore: a `LiveIndex` as plain values (what a snapshot keeps on disk) and back.

A restored index is the one exported, slot for slot: the same columns, postings (segments are
immutable, so shared, not copied), ties and totals — so it ranks exactly as the original did. Its
records may stay positions in a `RecordStore` until something reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...records import Record
from ...stored import RecordList, RecordStore
from ..documents import DocumentCounter
from .columns import _Columns
from .segments import _Postings


@dataclass(frozen=True, slots=True)
class IndexState:
    """A `LiveIndex` as plain values (see `LiveIndex.export`): per slot its record (a `Record`, a store
    position, or None once removed) and columns; ids → slots; each postings kind as (vocabulary,
    document frequencies, segments as (indptr, slots, counts)); `code` ties; the total document length;
    the ids of the records naming a git commit (so a restore knows them without building a record)."""

    records: list[Record | int | None]
    slot_of: dict[str, int]
    columns: dict[str, np.ndarray]
    terms: tuple[dict[str, int], np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    components: tuple[dict[str, int], np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    ties: dict[str, set[str]]
    total_dl: float
    dead_slots: int
    commits: frozenset[str] = frozenset()


class _Exporting:
    """`LiveIndex.export` and `LiveIndex.restore` (a part of `LiveIndex`: it reads and replaces the
    state `live.LiveIndex` holds, under its locks)."""

    def export(self) -> "IndexState":
        """What `restore` needs to stand this index up again, copied (segments are immutable, shared)."""
        with self._write_lock, self._lock:
            columns = self._columns
            return IndexState(
                records=list(self._slot_records.items), slot_of=dict(self._slot_of),
                columns={name: columns.view(name).copy() for name in _Columns.FIELDS},
                terms=self._terms.export(), components=self._components.export(),
                ties={path: set(ids) for path, ids in self._ties.items()}, total_dl=self._total_dl,
                dead_slots=self._dead_slots, commits=frozenset(self._commit_ids))

    def restore(self, state: "IndexState", store: RecordStore | None) -> None:
        """Replace everything with an exported state whose int records are positions in `store`."""
        columns = _Columns()  # everything built first: a state that does not fit changes nothing
        columns.grow(len(state.records))
        for name in _Columns.FIELDS:
            columns.view(name)[:] = state.columns[name]
        terms, components = _Postings.restored(*state.terms), _Postings.restored(*state.components)
        with self._write_lock, self._lock:
            self._columns = columns
            self._slot_records = RecordList(state.records, store)
            self._slot_of = state.slot_of
            self._terms, self._components = terms, components
            self._documents = DocumentCounter(terms.vocabulary)
            self._ties, self._total_dl, self._dead_slots = state.ties, state.total_dl, state.dead_slots
            self._commit_ids = set(state.commits)
            self.version += 1
            self._layout += 1
            self._forget_journal()
