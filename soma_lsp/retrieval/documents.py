"""Term counts of many records' documents at once, for building the index's postings.

docs/spec.md §2.2's document is name ×3, headline ×2, notes and details once; its terms are spec §2.1's. Per
record in Python that is a Counter and a few lists per record; here each field of a chunk of records
is one string split in C, every run (as written) is mapped to an id through a dictionary that grows by
the runs not seen before — only those are tokenized, once — the (term, record) pairs are counted in
numpy, and the chunks' counts are laid out as the postings' CSR. The result is exactly the bag
`tokenize` gives each field, weighted.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import count, filterfalse

import numpy as np

from .short_runs import SPACE, ShortRunTable
from .tokenize import ASCII_SEPARATORS, RUN, is_plain, tokenize

FIELD_WEIGHTS = (3, 2, 1, 1)  # name, headline, notes, details (spec §2.2)
CHUNK_DOCUMENTS = 256  # documents counted at once: their text, token strings and numpy temporaries stay in
# the CPU's cache and in memory already mapped (a whole 100k batch at once ran ~2× slower, much of it in
# page faults for fresh temporaries)
_MARK = "\x01"  # between two records' texts; kept (not a separator) so that it splits off as a token
# ASCII text is split as bytes (a byte table translates and `bytes.split` splits ~1.4× faster than str's)
_SEPARATOR_BYTES = bytes(SPACE if i in ASCII_SEPARATORS and i != ord(_MARK) else i for i in range(256))
_MARK_BYTES = _MARK.encode()


class _RunIds(dict):
    """Run as written (UTF-8 bytes) → id; an unseen run gets the next id and its terms are recorded."""

    def __init__(self, vocabulary: dict[str, int]) -> None:
        super().__init__({_MARK_BYTES: 0})
        self.vocabulary = vocabulary  # term → key, shared with the postings (new terms get new keys)
        # per run id: the key of its first term (-1 for the mark), and where its other terms (those
        # of a run that splits) sit in `others` and how many there are
        self.first: list[int] = [-1]
        self.others_start: list[int] = [0]
        self.others_count: list[int] = [0]
        self.others: list[int] = []
        self._buffers = tuple(np.zeros(0, np.int64) for _ in range(4))  # the lists, as far as converted
        self._converted = (0, 0, 0, 0)
        self.short = ShortRunTable()  # the ids of short runs, looked up in numpy

    def __missing__(self, written: bytes) -> int:
        run = written.decode()
        terms = (run,) if is_plain(run) else tokenize(run)
        keys = [self.vocabulary.setdefault(term, len(self.vocabulary)) for term in terms]
        self.first.append(keys[0])
        self.others_start.append(len(self.others))
        self.others_count.append(len(keys) - 1)
        self.others.extend(keys[1:])
        run_id = self[written] = len(self)
        return run_id

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The four lists as numpy arrays, converted only as far as they grew since the last call, into
        buffers that grow by doubling (so neither a one-record update nor a chunk of records that each
        bring new runs pays for all the pool's runs again)."""
        lists = (self.first, self.others_start, self.others_count, self.others)
        if self._converted[0] != len(self.first):  # all grow with `first`
            self._buffers = tuple(_appended(buffer, done, values)
                                  for buffer, done, values in zip(self._buffers, self._converted, lists))
            self._converted = tuple(len(values) for values in lists)
        return tuple(buffer[:size] for buffer, size in zip(self._buffers, self._converted))


def _runs_of(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal values of a sorted array starts, and how long it is."""
    starts = np.flatnonzero(np.concatenate((ordered[:1] == ordered[:1], ordered[1:] != ordered[:-1])))
    return starts, np.diff(np.append(starts, ordered.size))


def _appended(buffer: np.ndarray, done: int, values: list[int]) -> np.ndarray:
    """`buffer[:done]` followed by `values[done:]`: in place while the capacity lasts, else in a buffer
    twice as large."""
    if len(values) > buffer.size:
        grown = np.empty(max(len(values), 2 * buffer.size), dtype=np.int64)
        grown[:done] = buffer[:done]
        buffer = grown
    buffer[done:len(values)] = values[done:]
    return buffer


class DocumentCounter:
    """Counts the weighted terms of batches of documents; keys come from (and extend) `vocabulary`."""

    def __init__(self, vocabulary: dict[str, int]) -> None:
        self._runs = _RunIds(vocabulary)

    def count(self, documents: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weighted term counts of documents given as (name, headline, notes, details), as CSR by
        key: key k's rows (ascending) and tf are rows[indptr[k]:indptr[k + 1]] and counts[…]; indptr
        covers the whole vocabulary. Counted a chunk of documents at a time, then each chunk's triples
        are placed where they belong (a counting sort: no global sort, no copy of the whole batch but
        the result's). Compact dtypes (int32, float32: a tf is exact below 2²⁴)."""
        chunks = [self._count_chunk(documents[start:start + CHUNK_DOCUMENTS], start)
                  for start in range(0, len(documents), CHUNK_DOCUMENTS)]
        n_keys = len(self._runs.vocabulary)
        sizes = np.zeros(n_keys, dtype=np.int64)
        for keys, lengths, _, _ in chunks:
            sizes[keys] += lengths  # a chunk's keys are distinct
        indptr = np.zeros(n_keys + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        rows, counts = np.empty(indptr[-1], dtype=np.int32), np.empty(indptr[-1], dtype=np.float32)
        cursor = indptr[:-1].copy()
        for keys, lengths, chunk_rows, chunk_counts in chunks:
            # the chunk's run of key k goes to cursor[k] onwards: chunks come in row order, so each
            # key's rows stay ascending
            at = np.repeat(cursor[keys] - (np.cumsum(lengths) - lengths), lengths) + np.arange(chunk_rows.size)
            rows[at], counts[at] = chunk_rows, chunk_counts
            cursor[keys] += lengths
        return indptr, rows, counts

    def _count_chunk(self, documents: Sequence[Sequence[str]], first_row: int,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The chunk's distinct keys, how many documents hold each, and the (row, tf) pairs sorted by
        key then row."""
        n = len(documents)
        fields = [self._field_runs([d[field] for d in documents]) for field in range(len(FIELD_WEIGHTS))]
        expansion = self._runs.arrays()
        codes = []
        for (run_ids, rows), weight in zip(fields, FIELD_WEIGHTS):
            keys, rows = _terms(run_ids, rows, *expansion)
            codes.extend([keys * n + rows] * weight)
        code = np.concatenate(codes)
        code.sort()
        starts, counts = _runs_of(code)
        unique = code[starts]
        keys = unique // n
        key_starts, lengths = _runs_of(keys)
        return keys[key_starts], lengths, (unique - keys * n + first_row).astype(np.int32), counts.astype(np.float32)

    def _field_runs(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Run ids of every text's runs and the row (text index) of each."""
        runs = self._runs
        plain = [t.isascii() and _MARK not in t for t in texts]
        spaced = f" {_MARK} ".join([t if ok else "" for t, ok in zip(texts, plain)]).encode().translate(
            _SEPARATOR_BYTES)  # (NUL too is a separator: no zero byte is left for `ShortRunTable`)
        ids = runs.short.run_ids(spaced, runs)
        mark = ids == 0
        rows = np.cumsum(mark)[~mark]
        ids = ids[~mark]
        others = [(row, t) for row, (t, ok) in enumerate(zip(texts, plain)) if not ok]
        if others:  # spec §2.1's runs of alphanumeric characters, found by the regex
            extra = [(row, runs[run.encode()]) for row, text in others for run in RUN.findall(text)]
            if extra:
                more_rows, more_ids = np.array(extra, dtype=np.int64).T
                rows, ids = np.concatenate([rows, more_rows]), np.concatenate([ids, more_ids])
        return ids, rows


def _terms(run_ids: np.ndarray, rows: np.ndarray, first: np.ndarray, others_start: np.ndarray,
           others_count: np.ndarray, others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run's terms (its first, then the others of a run that splits), with its row."""
    count = others_count[run_ids]
    split = np.flatnonzero(count)
    if not split.size:
        return first[run_ids], rows
    lengths = count[split]
    ends = np.cumsum(lengths)
    at = np.repeat(others_start[run_ids[split]] - (ends - lengths), lengths) + np.arange(ends[-1])
    return (np.concatenate([first[run_ids], others[at]]),
            np.concatenate([rows, np.repeat(rows[split], lengths)]))


def csr(keys: np.ndarray, rows: np.ndarray, counts: np.ndarray, n_keys: int,
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR by key (indptr, rows as int32, counts as float32) of (key, row, count) triples whose (key, row)
    pairs are unique; rows that come ascending stay ascending within each key."""
    order = np.argsort(keys, kind="stable")
    indptr = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=indptr[1:])
    return indptr, rows[order].astype(np.int32, copy=False), counts[order].astype(np.float32, copy=False)


def bag_triples(bags: Sequence[Mapping[str, float]], vocabulary: dict[str, int],
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key, row, count) of every name of every bag (row: the bag's position), keys from `vocabulary`,
    which gains the names it lacks."""
    keys, counts = array("q"), array("d")  # packed machine values: 8 bytes each, not a Python object
    lengths = []
    for bag in bags:
        vocabulary.update(zip(filterfalse(vocabulary.__contains__, bag), count(len(vocabulary))))
        keys.extend(map(vocabulary.__getitem__, bag))
        counts.extend(bag.values())
        lengths.append(len(bag))
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return np.frombuffer(keys, dtype=np.int64), rows, np.frombuffer(counts, dtype=np.float64)


@dataclass(frozen=True, slots=True, eq=False)
class Counts:
    """Counts of `size` rows made elsewhere — in another process — as CSR by key (`indptr`, `rows`,
    `counts`), with a vocabulary of their own: `names`, in key order."""

    size: int
    names: Sequence[str]
    indptr: np.ndarray
    rows: np.ndarray
    counts: np.ndarray

    def select(self, rows: np.ndarray, vocabulary: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The CSR of these rows (ascending) as rows 0..len-1, keyed in `vocabulary`, which gains the
        names it lacks: the postings counting them here would give, though new names may get other
        keys. Each key is one name's run of postings here, so the runs are placed whole: nothing is
        sorted. Only the postings of rows from the first asked to the last are read (each name's
        run of them found by bisection; all of them when the counts are of those rows only, as a
        part's block is): a pool commits a file's records a batch at a time, and a pass over every
        posting of the file for each batch was most of the load's peak memory at 1M records (100M
        postings). Runs are gathered and reordered by one indexing each (`_runs`), not a slice per
        name (a Python loop over the 20k–90k names of a 100k file's blocks)."""
        n_names = len(self.names)
        names = self.names
        if rows.size == self.size and len(vocabulary) == 0:  # every row into nothing: keyed as here
            vocabulary.update(zip(names, range(n_names)))
            return self.indptr, self.rows, self.counts
        first, last = (int(rows[0]), int(rows[-1])) if rows.size else (0, -1)
        if not self.rows.size or first <= self.rows.min() and self.rows.max() <= last:
            spans, span_rows, span_counts = self.indptr, self.rows, self.counts  # (a part's own block)
        else:
            lo = _lower_bounds(self.rows, self.indptr, first)
            lengths = _lower_bounds(self.rows, self.indptr, last + 1) - lo
            spans = np.zeros(n_names + 1, dtype=np.int64)  # each name's postings of rows first..last
            np.cumsum(lengths, out=spans[1:])
            taken = _runs(lo, lengths)
            span_rows, span_counts = self.rows[taken], self.counts[taken]
        row_of = np.full(last - first + 1, -1, dtype=np.int32)
        row_of[rows - first] = np.arange(rows.size, dtype=np.int32)
        new_rows = row_of[span_rows - first]
        kept = new_rows >= 0
        kept_rows, kept_counts = new_rows[kept], span_counts[kept]
        # each name's kept postings: its span less the dropped ones (found by position: few)
        sizes = kept_per_run(spans, kept)
        before = np.zeros(n_names + 1, dtype=np.int64)  # where each name's kept postings start
        np.cumsum(sizes, out=before[1:])
        used = np.flatnonzero(sizes)
        key_of = np.zeros(n_names, dtype=np.int64)
        key_of[used] = [vocabulary.setdefault(names[t], len(vocabulary)) for t in used.tolist()]
        key_sizes = np.zeros(len(vocabulary), dtype=np.int64)
        key_sizes[key_of[used]] = sizes[used]
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(key_sizes, out=indptr[1:])
        order = used[np.argsort(key_of[used], kind="stable")]
        if np.array_equal(order, used):  # the names' runs already come in key order (a first batch)
            return indptr, kept_rows, kept_counts
        placed = _runs(before[order], sizes[order])
        return indptr, kept_rows[placed], kept_counts[placed]


def _runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of the runs `starts[i]`, `starts[i] + 1`, … (`lengths[i]` of them), one run after
    the other: what gathers (or reorders) runs of an array in one indexing, not a slice per run."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]) if ends.size else 0, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


def kept_per_run(indptr: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """How many items of each run (CSR `indptr`) are `kept`, found by the positions of those that are
    not (few, where it is used: lines left out of a batch, postings of removed records) — no array
    of a run per item."""
    return np.diff(indptr) - np.diff(np.searchsorted(np.flatnonzero(~kept), indptr))


def _lower_bounds(values: np.ndarray, indptr: np.ndarray, x: int) -> np.ndarray:
    """For each run `values[indptr[i]:indptr[i + 1]]` (ascending), the position of its first value
    ≥ x: a bisection of every run at once."""
    lo, hi = indptr[:-1].copy(), indptr[1:].copy()
    while True:
        open_ = np.flatnonzero(lo < hi)
        if not open_.size:
            return lo
        mid = (lo[open_] + hi[open_]) // 2
        below = values[mid] < x
        lo[open_[below]] = mid[below] + 1
        hi[open_[~below]] = mid[~below]


@dataclass(frozen=True, slots=True, eq=False)
class CountedLines:
    """What the index derives from records' text and architecture, derived instead from the lines of
    their file by another process (rows are line numbers): the documents' term counts
    (`DocumentCounter`'s), the component bags' counts, and each line's component total."""

    terms: Counts
    components: Counts
    arch_total: np.ndarray


def count_lines(documents: Sequence[tuple[str, str, str, str]], bags: Sequence[Mapping[str, float]]) -> CountedLines:
    """What the index needs of a file's lines, counted apart from the index (in another process): per
    line (its row) the document's term counts (`documents`: each line's four fields, as
    `index.document_fields` gives them of a record) and its architecture's component counts (`bags`:
    each line's `component_bag`; a line that is no record has empty fields and an empty bag). The
    index takes it as `LiveIndex.update(counted=...)`; the result ranks exactly as counting there."""
    terms: dict[str, int] = {}
    components: dict[str, int] = {}
    term_counts = DocumentCounter(terms).count(documents)
    component_counts = csr(*bag_triples(bags, components), len(components))
    return CountedLines(Counts(len(documents), list(terms), *term_counts),
                        Counts(len(bags), list(components), *component_counts),
                        np.array([sum(bag.values()) for bag in bags], dtype=np.float64))
