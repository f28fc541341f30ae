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
* `pruned` — the approximate step's cut for a query with a component bag: the structural term computed
  only at the slots whose upper bound can reach the cut;
* `planes` — the common components' counts as bit planes, a word a slot: a bag's shared counts at a few
  slots (the pruned cut's, the exact step's) in one gather and a popcount a plane;
* `contributions` — the float32 BM25 contributions the approximate step reuses, and which terms are
  added as dense vectors;
* `kept` — the bounded, least-recently-used dicts of what a query leaves for the next (answers,
  float32 vectors, weightings) while the layout stands.

* `tuning` — the tunables (segment size, merging, dense terms, lookup strides).

The names with an underscore are this package's own: its modules share them, and only the property
tests reach them from outside.
"""

from .contributions import _Contributions
from .live import LiveIndex, document_fields
from .segments import _Segment
from .state import IndexState

__all__ = ["IndexState", "LiveIndex", "document_fields"]
