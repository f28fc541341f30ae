"""The index's tunables, in one module its other modules read them from when used (`tuning.X`), so
that one assignment here — the property tests patch `FEW_SLOTS` and `SAMPLE_STRIDE` — reaches the
module that uses it. Why each value: the docstrings of the modules that use it."""

SEGMENT_RECORDS = 1 << 17  # bulk loads are cut into segments of this many records (bounds peak memory)
MERGE_FANOUT = 4  # merge the newest segments once this many of similar size have piled up
MERGE_MAX = 1 << 22  # postings: segments this big are never merged again (compaction aside)
DENSE_FRACTION = 4  # a term in ≥ 1/4 of the records is added as a dense vector, not scattered (or
# ≥ 1/8, see `_Contributions.dense_fraction`)
SAMPLE_STRIDE = 64  # `_Segment.counts_at` searches among every 64th posting first (1/8 byte a posting)
KEYS_ONE_BY_ONE = 4  # `_Segment.counts_at` searches up to this many keys' postings one key at a time
FEW_SLOTS = 4096  # exact values of up to this many slots are looked up, not scattered
SLOTS_IN_PYTHON = 16  # … and of up to this many (with the lexical max's contenders), in Python floats (`few`),
TERMS_IN_PYTHON = 8  # for a query of up to this many known terms (past it numpy's vectorised lookup costs less)
BLOCKS_READ_ALONE = 1 << 18  # from this many slots on, the cut (`_top_within`) and the lexical max's contenders
# (`_approximated`) are read in the blocks whose maxima reach them alone (at 100k a pass over all costs less)
PRUNED_FIRST = 24  # a query with a component bag scores first the best slots of 24·limit blocks of its bound
PRUNED_BLOCKS = 1024  # … of at least this many blocks (`pruned`; a pool of fewer than 4 slots a block is not pruned)
WEIGHTINGS_KEPT = 8  # query shapes whose per-record weighting is kept (see `_weighting`)
STATIC_PARTS_KEPT = 4  # per query shape: the approximate score's query-independent part for this many `now`s,
# its structural term for this many component bags (and remembers as many bags asked, `_bag_again`), and its
# denominators and bounds (`pruned`) for this many bag totals
PRESENCE_FRACTION = 32  # a component in ≥ 1/32 of the slots is added through a boolean presence vector
PLANES = 4  # … and its counts up to 4 are kept as bit planes, for its shared counts at a few slots (`planes`)
ANSWERS_KEPT = 64  # `rank`'s answers kept per layout (a file's definitions, hovered and lensed: results of a
# few dozen records each, small beside the index)
TERMS_KEPT = 1 << 16  # query words whose key and idf are kept per layout (`_known`; emptied past this many)
BAGS_KEPT = 64  # query architectures whose component bag and keys are kept per layout (`_bag_of`), and bags
# whose masks in the bit planes are (`planes`)
RECORD_COMPONENTS_KEPT = 1 << 16  # results' records whose sorted canonical components are kept per layout (`_scored`:
# a result's shared components without parsing its architecture again; ≈ 0.2 KB each, emptied past this many)
APPROXIMATIONS_KEPT = 4  # the approximate step's float32 bm25 of every slot, per layout, for this many term
# lists (4 bytes a slot each: 16 MB at 1M records)
WARM_SHARE = 4  # `LiveIndex.warm` makes the contributions of the words it is given until the cache holds
# 1/4 of its budget (128 MiB: ≈ 32M postings, ≈ 0.1 s of CPU at 1M records)
