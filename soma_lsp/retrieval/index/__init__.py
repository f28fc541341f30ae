"""The live index: a pool's records as columns and postings, updated in place, ranked in numpy.

Each record lives in a slot. Per-slot columns (document length, time, importance, architecture size)
are numpy arrays; terms and components have postings stored in immutable *segments* (CSR arrays, one
per update batch, small ones merged as they pile up). Removing a record clears its slot's `alive` bit
and its document frequencies; its postings stay until a compaction drops them. So an update costs what
its records cost (a batch's documents are counted at once, `documents.DocumentCounter`), and a query
costs the postings of its terms plus a few passes of vector arithmetic.

One idea a module:

* `segments` — CSR postings: immutable segments, a vocabulary and document frequencies per kind of
  key (terms, components), merged in tiers;
* `columns` — per-slot numpy columns that grow by doubling;
* `live` — `LiveIndex`: its state, the two locks and the atomic `update` (and reading by id or path);
* `state` — `IndexState`: the index as plain values, `export` and `restore` (what a snapshot keeps);
* `ranking` — `rank` and `score`: a query resolved against the index, its per-record weighting, the
  results; the two steps of a ranking with a limit are `approximate` (every slot in float32, with a
  proven error bound, then the slots that can make the cut) and `exact` (those slots in float64);
* `contributions` — the float32 BM25 contributions the approximate step reuses, and which terms are
  added as dense vectors.

The names with an underscore are this package's own: its modules share them, and only the property
tests reach them from outside (through this module). The tunables below, and `_top_within`, are read
from here when used (each module holds `package`, this module), so one assignment here — the property
tests patch `FEW_SLOTS`, `SAMPLE_STRIDE` and `_top_within` — reaches the module that uses it.
"""

SEGMENT_RECORDS = 1 << 17  # bulk loads are cut into segments of this many records (bounds peak memory)
MERGE_FANOUT = 4  # merge the newest segments once this many of similar size have piled up
MERGE_MAX = 1 << 22  # postings: segments this big are never merged again (compaction aside)
DENSE_FRACTION = 4  # a term in ≥ 1/4 of the records is added as a dense vector, not scattered (or
# ≥ 1/8, see `_Contributions.dense_fraction`)
SAMPLE_STRIDE = 64  # `_Segment.counts_at` searches among every 64th posting first (1/8 byte a posting)
FEW_SLOTS = 4096  # exact values of up to this many slots are looked up, not scattered
WEIGHTINGS_KEPT = 8  # query shapes whose per-record weighting is kept (see `_weighting`)

from .approximate import _top_within  # noqa: E402 (after the tunables its modules read)
from .contributions import _Contributions  # noqa: E402
from .live import LiveIndex, document_fields  # noqa: E402
from .segments import _Segment  # noqa: E402
from .state import IndexState  # noqa: E402

__all__ = ["DENSE_FRACTION", "FEW_SLOTS", "MERGE_FANOUT", "MERGE_MAX", "SAMPLE_STRIDE", "SEGMENT_RECORDS",
           "WEIGHTINGS_KEPT", "IndexState", "LiveIndex", "document_fields"]
