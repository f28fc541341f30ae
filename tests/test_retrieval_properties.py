"""Hypothesis: the index against the spec reference on random pools, and docs/spec.md §2's invariants."""

import math
from datetime import datetime, timedelta, timezone

from unittest import mock

import bm25s
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import spec_reference as ref
from soma_lsp.retrieval import index as index_module
from soma_lsp.retrieval.index import approximate, tuning
from soma_lsp.records import parse_record
from soma_lsp.retrieval import LiveIndex, RetrievalQuery, rank, tokenize

WORDS = ["rope", "theta", "RoPE", "LayerNorm", "layer_norm", "moe", "top-k", "lr", "warmup", "diverges",
         "ALiBi", "HTTPServer", "bf16", "3e-4", "SwiGLU", "gelu", "qk_norm", "z-loss", "ResNet50", "Größe"]
COMPONENTS = ["Linear", "nn.Linear", "torch.nn.LayerNorm", "layer_norm", "RMSNorm", "Attention", "SwiGLU",
              "Conv2d", "MoE", "Embedding"]
STATUSES = ["succeeded", "failed", "crashed", "regressed", "running", "unknown", "OK", "errored", "killed"]
BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)

text = st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join)
stamp = st.integers(-400, 400).map(lambda d: BASE + timedelta(days=d, hours=d % 7, minutes=d % 13))
timestamp = st.one_of(
    st.none(),
    stamp.map(lambda t: t.isoformat().replace("+00:00", "Z")),
    stamp.map(lambda t: t.astimezone(timezone(timedelta(hours=2))).isoformat()),
    stamp.map(lambda t: t.replace(tzinfo=None).isoformat()),
    st.sampled_from(["9999-12-31T00:00:00Z", "1901-01-01T00:00:00Z"]),  # typos, centuries off
)
architecture = st.one_of(
    st.none(),
    st.lists(st.sampled_from(COMPONENTS), max_size=5),
    st.dictionaries(st.sampled_from(COMPONENTS), st.integers(-1, 4), max_size=4),
)
metric = st.fixed_dictionaries(
    {"name": st.sampled_from(["loss", "acc"]), "value": st.one_of(st.floats(0, 3), st.just("nan"), st.just("-inf"))},
    optional={"baseline": st.floats(-2, 3), "goal": st.sampled_from(["min", "max", "higher", "lower"])},
)
record_fields = st.fixed_dictionaries(
    {"name": text.filter(str.strip)},
    optional={"status": st.sampled_from(STATUSES), "conclusion": st.one_of(text, st.fixed_dictionaries(
        {"headline": text}, optional={"details": text})), "notes": text, "architecture": architecture,
        "created_at": timestamp, "finished_at": timestamp, "metrics": st.lists(metric, max_size=3),
        "importance": st.floats(0, 1)},
)


@st.composite
def pools(draw):
    fields = draw(st.lists(record_fields, min_size=1, max_size=25))
    records = [parse_record({"id": f"exp-{i:03d}", **f}) for i, f in enumerate(fields)]
    twins = draw(st.lists(st.sampled_from(range(len(fields))), max_size=3))
    records += [parse_record({"id": f"twin-{j}-{i:03d}", **fields[i]}) for j, i in enumerate(twins)]
    return records


queries = st.fixed_dictionaries({
    "text": text, "architecture": architecture,
    "now": st.one_of(st.none(), stamp), "half_life": st.sampled_from([30.0, 7.5, 365.0]),
})


def _query(q, limit=None):
    return RetrievalQuery(text=q["text"], architecture=q["architecture"], now=q["now"],
                          half_life_days=q["half_life"], limit=limit)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), queries)
def test_rank_equals_the_spec_reference(records, q):
    got = rank(records, _query(q))
    want = ref.rank(records, q["text"], q["architecture"], q["now"], q["half_life"], limit=None)
    assert [r.record.id for r in got] == [w[1] for w in want]
    for g, (score, _, comp, eff, matched) in zip(got, want):
        assert g.score == pytest.approx(score, abs=1e-9)
        for term, value in comp.items():
            mine = getattr(g.components, term)
            assert (mine is None) == (value is None)
            if value is not None:
                assert mine == pytest.approx(value, abs=1e-9)
            assert g.components.weights[term] == pytest.approx(eff[term], abs=1e-12)
        assert list(g.components.matched_terms) == matched


@settings(max_examples=100)
@given(pools(), queries, st.randoms(use_true_random=False))
def test_invariants(records, q, rnd):
    result = rank(records, _query(q))
    assert sorted(r.record.id for r in result) == sorted(r.id for r in records)  # a permutation
    keys = [(-r.score, r.record.id) for r in result]
    assert keys == sorted(keys)
    for r in result:
        assert 0.0 <= r.score <= 1.0 + 1e-12
        assert math.isclose(sum(r.components.weights.values()), 1.0)
        for term in ("lexical", "structural", "recency", "importance"):
            value = getattr(r.components, term)
            assert value is None or 0.0 <= value <= 1.0 + 1e-12
    shuffled = list(records)
    rnd.shuffle(shuffled)
    again = rank(shuffled, _query(q))
    assert [(r.record.id, r.score) for r in again] == [(r.record.id, r.score) for r in result]
    limited = rank(records, _query(q, limit=3))
    assert [r.record.id for r in limited] == [r.record.id for r in result[:3]]


@settings(max_examples=100)
@given(pools(), text, text.filter(str.strip))
def test_an_unrelated_record_never_lifts_lexical_above_one(records, query_text, other):
    unrelated_terms = set(tokenize(query_text))
    extra = parse_record({"id": "zzz-unrelated", "name": "qqqq " + " ".join(
        t for t in tokenize(other) if t not in unrelated_terms) })
    before = {r.record.id: r.components.lexical for r in rank(records, RetrievalQuery(text=query_text, limit=None))}
    after = rank([*records, extra], RetrievalQuery(text=query_text, limit=None))
    for r in after:
        if r.components.lexical is not None:
            assert r.components.lexical <= 1.0
        if r.record.id in before and before[r.record.id] == 0:
            assert r.components.lexical == 0


def test_raw_bm25_matches_bm25s_lucene():
    """The lexical order equals bm25s's Lucene BM25 (same idf; its score lacks the (k1+1) factor)."""
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(300)]
    zipf = 1 / np.arange(1, 301)
    zipf /= zipf.sum()
    records = [parse_record({"id": f"d{i:04d}", "name": " ".join(rng.choice(vocab, 3, p=zipf)),
                             "notes": " ".join(rng.choice(vocab, rng.integers(5, 60), p=zipf))})
               for i in range(800)]
    docs = [tokenize(r.name) * 3 + tokenize(r.notes) for r in records]
    ids = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    model.index(bm25s.tokenization.Tokenized(ids=[[ids[t] for t in d] for d in docs], vocab=dict(ids)),
                show_progress=False)
    index = LiveIndex(records)
    lexical_only = {"lexical": 1.0, "structural": 0.0, "recency": 0.0, "importance": 0.0}
    for q in range(20):
        terms = list(dict.fromkeys(rng.choice(vocab, 4, p=zipf)))
        theirs = model.get_scores([ids[t] for t in terms if t in ids])
        ours = index.rank(RetrievalQuery(text=" ".join(terms), weights=lexical_only, limit=None))
        mine = np.array([r.score for r in sorted(ours, key=lambda r: r.record.id)])
        top = theirs.max()
        np.testing.assert_allclose(mine, theirs / top if top > 0 else theirs, rtol=1e-5, atol=1e-7)


def _same(a, b):
    """Two ranked lists agree exactly: ids, scores and components, to the last bit."""
    assert [(r.record.id, r.score, r.components, r.dead_end) for r in a] == \
        [(r.record.id, r.score, r.components, r.dead_end) for r in b]


def _churned(records, churn, index=None):
    """An index of the records (or `index`), then some of them replaced or removed: their old slots
    stay behind, dead."""
    index = LiveIndex(records) if index is None else index
    for i in churn:
        victim = records[i % len(records)]
        if i % 2:
            index.update(remove=[victim.id])
        else:
            index.update(add=[victim])
    return index


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), queries, st.integers(1, 6), st.booleans(), st.sampled_from([0.0, 0.3, 0.6]),
       st.lists(st.integers(0, 40), max_size=6))
def test_a_cut_ranking_is_the_full_ranking_cut(records, q, limit, relevant_only, min_score, churn):
    """`rank` with a limit scores approximately and rescores a few slots exactly; it must give the
    first `limit` of the exact full ranking, also with dead slots left by replaced and removed records."""
    index = _churned(records, churn)
    full = index.rank(_query(q), relevant_only=relevant_only, min_score=min_score)
    _same(index.rank(_query(q, limit=limit), relevant_only=relevant_only, min_score=min_score), full[:limit])
    _same(index.score(_query(q), [r.record.id for r in full]), full)
    with mock.patch.object(tuning, "FEW_SLOTS", 0):  # exact bm25 scattered, not looked up
        _same(index.rank(_query(q), relevant_only=relevant_only, min_score=min_score), full)
    with mock.patch.object(tuning, "SLOTS_IN_PYTHON", 0), mock.patch.object(tuning, "ANSWERS_KEPT", 0):
        # the few slots' exact values from numpy arrays, not Python floats
        _same(index.rank(_query(q, limit=limit), relevant_only=relevant_only, min_score=min_score), full[:limit])
    with mock.patch.object(tuning, "BLOCKS_READ_ALONE", 0), mock.patch.object(tuning, "ANSWERS_KEPT", 0), \
            mock.patch.object(tuning, "APPROXIMATIONS_KEPT", 0):
        # the lexical max's contenders and the cut read from the blocks near them, as past 2^18 slots
        _same(index.rank(_query(q, limit=limit), relevant_only=relevant_only, min_score=min_score), full[:limit])
    index.warm([])  # the end of a load: the bit planes made, the few slots' shared counts read from them
    with mock.patch.object(tuning, "ANSWERS_KEPT", 0), mock.patch.object(tuning, "APPROXIMATIONS_KEPT", 0):
        _same(index.rank(_query(q, limit=limit), relevant_only=relevant_only, min_score=min_score), full[:limit])


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.lists(queries, min_size=1, max_size=4), st.lists(st.integers(0, 40), max_size=4))
def test_what_queries_keep_between_them_changes_nothing(records, qs, churn):
    """A stream of queries on one index — each asked twice, so the second finds the score's
    query-independent part kept for its `now` — ranks as each query on an index of its own does, bit
    for bit; and adding a common component through its presence vector (in a pool this small every
    component is common) equals scattering it from the postings (PRESENCE_FRACTION 0: none is), in the
    approximate step and in the exact one (FEW_SLOTS 0: every slot's values come from a pass over all).
    Answers are not kept here (ANSWERS_KEPT 0): each ask computes its ranking."""
    stream = _churned(records, churn)
    for q in qs:
        for limit, few_slots in ((2, tuning.FEW_SLOTS), (2, tuning.FEW_SLOTS), (2, 0), (None, 0)):
            with mock.patch.object(tuning, "FEW_SLOTS", few_slots), mock.patch.object(tuning, "ANSWERS_KEPT", 0):
                got = stream.rank(_query(q, limit))
                with mock.patch.object(tuning, "PRESENCE_FRACTION", 0):
                    _same(got, _churned(records, churn).rank(_query(q, limit)))
                _same(got, _churned(records, churn).rank(_query(q, limit)))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), queries, st.dictionaries(st.sampled_from(COMPONENTS), st.sampled_from([0.1, 0.3, 0.7, 1.0, 2.0, 3.0]),
                                         min_size=1, max_size=6), st.integers(1, 6), st.lists(st.integers(0, 40), max_size=4))
@example(records=[parse_record({"id": "exp-000", "name": "x", "architecture": ["Attention", "MoE", "Linear"]})],
         q={"text": "", "architecture": None, "now": None, "half_life": 30.0},
         bag={"Attention": 0.1, "MoE": 0.3, "Linear": 1.0}, limit=1, churn=[])  # (0.1 + 0.3) + 1 ≠ (1 + 0.1) + 0.3
def test_whole_and_fractional_component_counts_share_alike_every_way(records, q, bag, limit, churn):
    """A query bag mixing whole and fractional counts: its shared counts — whole counts summed as
    small integers through presence vectors and the others added after (the approximate step), or
    in query order (the exact step's pass over all slots, FEW_SLOTS 0), looked up for few slots (in
    numpy, SLOTS_IN_PYTHON 0, or in Python floats), or every component scattered from its postings
    (PRESENCE_FRACTION 0) — rank alike, bit for bit."""
    q = {**q, "architecture": bag}
    full = _churned(records, churn).rank(_query(q))
    with mock.patch.object(tuning, "ANSWERS_KEPT", 0):
        _same(_churned(records, churn).rank(_query(q, limit)), full[:limit])
        for few_slots, in_python in ((0, 0), (tuning.FEW_SLOTS, 0), (tuning.FEW_SLOTS, tuning.SLOTS_IN_PYTHON)):
            with mock.patch.object(tuning, "FEW_SLOTS", few_slots), mock.patch.object(tuning, "SLOTS_IN_PYTHON", in_python):
                _same(_churned(records, churn).rank(_query(q)), full)
                with mock.patch.object(tuning, "PRESENCE_FRACTION", 0):
                    _same(_churned(records, churn).rank(_query(q, limit)), full[:limit])
                    _same(_churned(records, churn).rank(_query(q)), full)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.lists(queries, min_size=1, max_size=4), st.booleans(), st.lists(st.integers(0, 40), min_size=1, max_size=4))
def test_an_answer_kept_is_the_answer_computed(records, qs, relevant_only, churn):
    """`rank` keeps its answers while the layout stands: asked again, a question gets a copy of its
    answer (emptying the first changes nothing), a kept answer is what a fresh index computes, and an
    update — which moves the layout — drops them (after the churn the answers are the churned pool's)."""
    stream = LiveIndex(records)
    with mock.patch.object(tuning, "ANSWERS_KEPT", 2):  # fewer than the questions: eviction too
        for q in qs:
            stream.rank(_query(q, 3), relevant_only=relevant_only).clear()
        for q in qs:
            _same(stream.rank(_query(q, 3), relevant_only=relevant_only),
                  LiveIndex(records).rank(_query(q, 3), relevant_only=relevant_only))
        _churned(records, churn, stream)
        for q in qs:
            _same(stream.rank(_query(q, 3), relevant_only=relevant_only),
                  _churned(records, churn).rank(_query(q, 3), relevant_only=relevant_only))


@st.composite
def copied_pools(draw):
    """`pools`' records, each drawn record copied up to 8 times under other ids: enough slots for
    several a block when the cut is pruned (`pruned`, patched to a few blocks)."""
    fields = draw(st.lists(record_fields, min_size=1, max_size=12))
    copies = draw(st.integers(1, 8))
    return [parse_record({"id": f"exp-{i:03d}-{c}", **f}) for i, f in enumerate(fields) for c in range(copies)]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(copied_pools(), queries, architecture.filter(bool), st.integers(1, 6), st.sampled_from([1, 2, 3]),
       st.sampled_from([1, 4, 16]), st.booleans(), st.lists(st.integers(0, 60), max_size=8))
def test_a_pruned_cut_is_the_full_cut(records, q, bag, limit, first, blocks, relevant_only, churn):
    """With a component bag the cut computes the structural term only at the slots whose bound —
    static part + w'·min(Σq, Σr)/max(Σq, Σr), plus the lexical part — reaches the threshold the first
    slots give (`pruned`): the bound is at least every slot's approximate score less η, and the slots
    chosen are those of the cut over every slot, so the ranking is the full one cut, bit for bit. A
    bound a hair too low (ρ·(1 − 2⁻¹⁸)) or a block's last slot left out of its maximum makes this fail
    (η, a few units of float32 rounding inside a margin of 2δ, is not caught here)."""
    from soma_lsp.retrieval.index import pruned

    index = _churned(records, churn)
    resolved = index._resolve(_query({**q, "architecture": bag}, limit))
    if resolved.bag_total <= 0:
        return
    approximation = index._approximate(resolved)
    with mock.patch.object(tuning, "PRUNED_FIRST", first), mock.patch.object(tuning, "PRUNED_BLOCKS", blocks), \
            mock.patch.object(approximate._ApproximatePass, "_bag_again", lambda *_: False):  # every ask pruned
        found = index._candidates(resolved, limit, relevant_only, approximation)
        with mock.patch.object(pruned._PrunedPass, "_pruned", lambda *_: None):
            assert found.tolist() == index._candidates(resolved, limit, relevant_only, approximation).tolist()
        with mock.patch.object(tuning, "ANSWERS_KEPT", 0):
            _same(index.rank(_query({**q, "architecture": bag}, limit), relevant_only=relevant_only),
                  index.rank(_query({**q, "architecture": bag}), relevant_only=relevant_only)[:limit])
    static, _ = index._static_part(resolved)
    score = static + index._structural_term(resolved)
    bound = index._bounded_rest(resolved).copy()
    if approximation is not None:
        lexical = np.multiply(resolved.weighting["float32"]["lexical"], approximation.bm25)
        lexical *= np.float32(1.0 / approximation.top)
        score = (lexical + static) + index._structural_term(resolved)
        bound += lexical
    alive = index._columns.view("alive")
    assert np.all(bound[~alive] == -np.inf)
    eta = (2 * len(resolved.bag) + 16) * 2.0 ** -24
    assert np.all(bound[alive].astype(np.float64) >= score[alive] - eta)




def test_over_a_pool_large_enough_the_pruned_cut_takes_its_own_path_and_is_the_full_cut():
    """The property test's pools (≤ 96 records) are mostly too small to prune (fewer than 4 slots a
    block), so here a pool of 3,000 varied records and 40 queries: the pruned cut must answer (not give
    up) for most of them, and always with the full cut's slots."""
    import random

    from soma_lsp.retrieval.index import pruned

    rnd = random.Random(5)
    words = "rope theta warmup cosine decay clip norm swiglu router expert dropout batch seq bf16 head".split()
    records = [parse_record({
        "id": f"r{i:05d}", "name": "-".join(rnd.sample(words, 2)), "notes": " ".join(rnd.choices(words, k=12)),
        "status": rnd.choice(["succeeded", "failed"]), "architecture": rnd.sample(COMPONENTS, rnd.randint(0, 4)),
        "finished_at": f"2026-{rnd.randint(1, 11):02d}-{rnd.randint(1, 28):02d}T00:00:00Z"}) for i in range(3000)]
    index = LiveIndex(records)
    answers: list = []
    for _ in range(40):
        limit = rnd.choice([1, 5, 10])
        resolved = index._resolve(RetrievalQuery(text=" ".join(rnd.sample(words, 3)), limit=limit,
                                                 architecture=rnd.sample(COMPONENTS, 2),
                                                 now=datetime(2026, 12, 1, tzinfo=timezone.utc)))
        approximation = index._approximate(resolved)
        with mock.patch.object(tuning, "PRUNED_BLOCKS", 16), \
                mock.patch.object(approximate._ApproximatePass, "_bag_again", lambda *_: False):
            with _recording(pruned._PrunedPass, "_pruned", answers):
                found = index._candidates(resolved, limit, False, approximation)
            with mock.patch.object(pruned._PrunedPass, "_pruned", lambda *_: None):
                assert found.tolist() == index._candidates(resolved, limit, False, approximation).tolist()
    assert sum(answer is not None for answer in answers) >= 30


def test_a_pruned_cut_of_records_alike_gives_up_before_scoring_them_one_by_one():
    """Records that share one bound (no time, the same components) leave the first read's floor at that
    bound: every slot reaches it, and scoring them one by one cost ≈ 5× the pass over every slot. Past
    FEW_SLOTS slots the pruned cut says None before scoring any (every slot is then scored in one pass,
    as without it): the same ranking."""
    from soma_lsp.retrieval.index import pruned

    records = [parse_record({"id": f"r{i:04d}", "name": "rope", "architecture": ["Attention", "RMSNorm"]})
               for i in range(400)]
    index = LiveIndex(records)
    resolved = index._resolve(RetrievalQuery(text="rope", architecture=["Attention", "Linear"], limit=5))
    answers: list = []
    scored: list = []
    with mock.patch.object(tuning, "PRUNED_FIRST", 1), mock.patch.object(tuning, "PRUNED_BLOCKS", 8), \
            mock.patch.object(tuning, "FEW_SLOTS", 64), \
            mock.patch.object(approximate._ApproximatePass, "_bag_again", lambda *_: False), \
            _recording(pruned._PrunedPass, "_pruned", answers), \
            _recording(pruned._PrunedPass, "_assembled_at", scored, lambda args, _: len(args[1])):
        found = index._candidates(resolved, 5, False, index._approximate(resolved))
    assert answers == [None] and scored == []
    with mock.patch.object(pruned._PrunedPass, "_pruned", lambda *_: None):
        assert found.tolist() == index._candidates(resolved, 5, False, index._approximate(resolved)).tolist()


def _recording(cls, name: str, seen: list, what=lambda args, answer: answer):
    """A patch of `cls.name` that answers as it does and appends `what(args, answer)` of each call to `seen`."""
    real = getattr(cls, name)

    def spy(self, *args):
        answer = real(self, *args)
        seen.append(what(args, answer))
        return answer

    return mock.patch.object(cls, name, spy)


def test_a_bag_asked_again_keeps_its_structural_term():
    """A bag asked once is pruned (its structural term at a few slots, nothing kept); asked again — a
    file's hovers share its architecture — its structural term is computed at every slot and kept, and
    the next asks add it: the same ranking each time."""
    records = [parse_record({"id": f"r{i:04d}", "name": f"rope w{i % 7}", "architecture": COMPONENTS[i % 5:i % 5 + 3],
                             "created_at": (BASE + timedelta(days=i % 50)).isoformat()}) for i in range(4200)]
    index = LiveIndex(records)
    ask = RetrievalQuery(text="rope w3", architecture=["Attention", "MoE"], now=BASE, limit=5)
    with mock.patch.object(tuning, "ANSWERS_KEPT", 0):
        first = index.rank(ask)
        weighting = index._resolve(ask).weighting
        assert weighting["structural"] == {} and len(weighting["bags"]) == 1
        _same(index.rank(ask), first)
        assert len(weighting["structural"]) == 1
        _same(index.rank(ask), first)
    _same(first, index.rank(RetrievalQuery(text="rope w3", architecture=["Attention", "MoE"], now=BASE))[:5])


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.dictionaries(st.sampled_from(COMPONENTS), st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0]), min_size=1,
                                max_size=6), st.lists(st.integers(0, 40), max_size=4), st.sampled_from([1, 2, 4]))
def test_shared_counts_from_bit_planes_are_the_pass_over_every_slot(records, bag, churn, planes):
    """The shared counts at given slots read from the bit planes (`planes`) are, in float32 and float64, the
    pass over every slot's, bit for bit — dead slots too; and the planes answer exactly when they hold the
    bag: every count whole (these pools' are), every component a common one and min(q_c, its largest count)
    ≤ PLANES. A plane
    set where a record counts a component j times, not more than j, makes this fail."""
    index = _churned(records, churn)
    with mock.patch.object(tuning, "PLANES", planes):
        q = index._resolve(RetrievalQuery(architecture=bag))
        slots = np.arange(index._columns.size)
        tops = {key: top for key, (_, top) in index._planes()[1].items()}
        held = all(key in tops and float(c).is_integer() and min(int(c), tops[key]) <= planes  # (a component
                   for key, c in zip(q.bag_keys, q.bag.values()) if key >= 0)  # whose records all went has no bit)
        for dtype in (np.float32, np.float64):
            got = index._planes_shared(q, slots, dtype)
            assert (got is not None) == held
            if got is not None:
                want = index._shared_counts(q, dtype)
                assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_a_component_of_fractional_counts_has_no_bit_and_its_bags_take_the_other_paths():
    """A component some record counts 1.5 times is left out of the planes (its sums depend on their order),
    and a bag naming it is summed by the presence vectors and postings, as before — the same ranking."""
    records = [parse_record({"id": f"exp-{i}", "name": "x", "architecture": arch}) for i, arch in
               enumerate([{"Attention": 1.5, "MoE": 2}, {"Attention": 1, "MoE": 1}, ["MoE", "Linear"]])]
    index = LiveIndex(records)
    _, bits = index._planes()
    assert sorted(index._components.keys_of(["moe", "linear"]).tolist()) == sorted(bits)
    for bag in ({"Attention": 1, "MoE": 1}, {"MoE": 2, "Linear": 1}):
        q = index._resolve(RetrievalQuery(architecture=bag))
        assert (index._planes_shared(q, np.arange(3), np.float64) is None) == ("Attention" in bag)
        with mock.patch.object(tuning, "ANSWERS_KEPT", 0):
            _same(index.rank(RetrievalQuery(architecture=bag, limit=2)), index.rank(RetrievalQuery(architecture=bag))[:2])


@settings(max_examples=300)
@given(st.lists(st.floats(-1, 1, width=32), min_size=1, max_size=200), st.integers(1, 64))
def test_interleaved_maxima_are_the_maxima_of_a_partition(values, blocks):
    from soma_lsp.retrieval.index.pruned import _interleaved_maxima

    values = np.array(values, dtype=np.float32)
    if values.size < blocks:
        return
    got = _interleaved_maxima(values, blocks)
    assert got.tolist() == [values[k::blocks].max() for k in range(blocks)]


@settings(max_examples=300)
@given(st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.25, 0.5, -np.inf])), min_size=1, max_size=300),
       st.integers(1, 12), st.sampled_from([0.0, 1e-6, 0.05]), st.integers(1, 16))
def test_top_within_keeps_exactly_what_is_within_the_margin(values, limit, margin, blocks):
    from soma_lsp.retrieval.index.approximate import _top_within

    score = np.array(values)
    finite = np.sort(score[score > -np.inf])
    got = _top_within(score, limit, margin, blocks=blocks)
    if finite.size <= limit:
        assert got.tolist() == np.flatnonzero(score > -np.inf).tolist()
    else:
        kth = finite[finite.size - limit]
        assert got.tolist() == np.flatnonzero(score >= kth - margin).tolist()


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4000), st.integers(1, 12), st.sampled_from([0.0, 1e-6, 0.05]),
       st.integers(1, 64), st.sampled_from([3, 50, 0]), st.sampled_from([0, 1 << 30]))
def test_top_within_over_many_blocks_reads_every_value_it_needs(seed, size, limit, margin, blocks, levels, alone):
    """Past 4 values a block, the pool is read in one pass or (from `BLOCKS_READ_ALONE` values on) only
    in the blocks whose maximum reaches the cut: either way every value within the margin is found, at
    any place in its block (ties and −inf included)."""
    from soma_lsp.retrieval.index.approximate import _top_within

    rng = np.random.default_rng(seed)
    score = rng.random(size, dtype=np.float32)
    if levels:  # ties: a few distinct values
        score = np.floor(score * levels).astype(np.float32) / levels
    score[rng.random(size) < 0.1] = -np.inf
    finite = np.sort(score[score > -np.inf])
    with mock.patch.object(tuning, "BLOCKS_READ_ALONE", alone):
        got = _top_within(score, limit, margin, blocks=blocks)
    if finite.size <= limit:
        assert got.tolist() == np.flatnonzero(score > -np.inf).tolist()
    else:
        kth = finite[finite.size - limit]
        assert got.tolist() == np.flatnonzero(score >= kth - margin).tolist()


@settings(max_examples=300)
@given(st.sets(st.integers(0, 60)), st.sets(st.integers(0, 60)))
def test_the_union_of_sorted_slots_is_numpys(a, b):
    from soma_lsp.retrieval.index.exact import _union

    left, right = np.array(sorted(a), dtype=np.intp), np.array(sorted(b), dtype=np.intp)
    got = _union(left, right)
    assert got.dtype == np.union1d(left, right).dtype and got.tolist() == np.union1d(left, right).tolist()


@settings(max_examples=300)
@given(st.lists(st.one_of(st.integers(1, 40), st.integers(1, 1 << 24)), max_size=50),
       st.floats(1e-6, 30), st.floats(1e-3, 1e3), st.floats(0, 1e4))
def test_a_contribution_is_the_spec_arithmetic_and_its_float32_one_within_the_bound(tf, idf_t, low, spread):
    """The exact step's contribution is spec §2.2's float64 arithmetic, bit for bit; the approximate
    step's, in float32 arithmetic, is within APPROXIMATE_CONTRIBUTION_ULPS·u of it (the bound the
    approximate step's margin is derived from) — and no closer than what float32 can hold."""
    from soma_lsp.retrieval import terms as T
    from soma_lsp.retrieval.index.contributions import (APPROXIMATE_CONTRIBUTION_ULPS, _approximate_contribution,
                                                        _contribution)

    counts = np.array(tf, dtype=np.float32)
    norm = np.linspace(low, low + spread, 2 * counts.size + 1)
    slots = np.arange(1, 2 * counts.size + 1, 2, dtype=np.int32)
    wide = idf_t * T.tf_part(counts.astype(np.float64), norm[slots])
    assert _contribution(idf_t, counts, norm, slots).tobytes() == wide.tobytes()
    narrow = _approximate_contribution(idf_t, counts, norm.astype(np.float32), slots)
    assert narrow.dtype == np.float32
    assert np.all(np.abs(narrow.astype(np.float64) - wide) <= APPROXIMATE_CONTRIBUTION_ULPS * 2.0 ** -24 * wide)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), queries, st.lists(st.integers(0, 40), max_size=4), st.sampled_from([1 << 29, 0]))
def test_the_approximate_bm25_is_within_its_bound_of_the_exact_one(records, q, churn, budget):
    """Every slot's float32 bm25 (contributions sparse or dense, cached or not: budget 0 keeps none)
    is within half the step's ε of the exact bm25 — the proven (2n + c)·u —, its `top` is the
    largest over live slots and its contenders the live slots within 2ε of it, read in one pass or
    (from `BLOCKS_READ_ALONE` slots on) from the blocks near the max alone."""
    index = _churned(records, churn)
    index._contributions.budget = budget
    resolved = index._resolve(_query(q, limit=1))
    approximation = index._approximate(resolved)
    if approximation is None:
        assert resolved.keys.size == 0
        return
    alive = np.flatnonzero(index._columns.view("alive"))
    with mock.patch.object(tuning, "FEW_SLOTS", 0):
        exact, _ = index._bm25_at(resolved, alive)
    got = approximation.bm25[alive].astype(np.float64)
    assert np.all(np.abs(got - exact) <= approximation.error / 2 * exact)
    assert approximation.top == got.max()
    near = alive[approximation.bm25[alive] >= approximation.top * (1 - 2 * approximation.error)]
    assert approximation.contenders.tolist() == near.tolist()
    with mock.patch.object(tuning, "BLOCKS_READ_ALONE", 0):  # the blocks near the max read alone
        again = index._approximated(resolved)
    assert (again.top, again.contenders.tolist()) == (approximation.top, near.tolist())


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.lists(queries, min_size=1, max_size=4), st.sampled_from([0, 64, 512]))
def test_a_small_contribution_cache_stays_bounded_and_changes_nothing(records, qs, budget):
    """The float32 contribution cache evicts least recently used parts past its byte budget; what it
    holds never changes a ranking."""
    index, reference = LiveIndex(records), LiveIndex(records)
    index._contributions.budget = budget
    for q in qs:
        _same(index.rank(_query(q, limit=3)), reference.rank(_query(q, limit=3)))
        cache = index._contributions
        assert cache.held == sum(held for _, held in cache.parts.values())
        assert cache.held <= budget or len(cache.parts) <= 1


def test_the_margin_keeps_a_near_tie_exact():
    """Two records 7e-9 apart whose float32 approximations come in the other order (found by search):
    the cut ranking still returns the exact best. Without the margin it would not — the last assertion
    shows this test can fail (it may need a new pair if the float32 assembly changes)."""
    records = [parse_record({"id": "r0", "name": "rope moe", "importance": 0.8747456297787619}),
               parse_record({"id": "r1", "name": "theta theta layer", "notes": "gate moe gate",
                             "importance": 0.7978225308614354})]
    index = LiveIndex(records)
    full = index.rank(RetrievalQuery(text="rope theta norm", limit=None))
    assert [r.record.id for r in full] == ["r0", "r1"] and 0 < full[0].score - full[1].score < 1e-7
    assert [r.record.id for r in index.rank(RetrievalQuery(text="rope theta norm", limit=1))] == ["r0"]
    top_within = approximate._top_within
    no_margin = lambda score, limit, margin, blocks=1024: top_within(score, limit, 0.0, blocks)  # noqa: E731
    with mock.patch.object(approximate, "_top_within", no_margin):  # a fresh index: no answer kept
        assert [r.record.id for r in LiveIndex(records).rank(RetrievalQuery(text="rope theta norm", limit=1))] == ["r1"]


@settings(max_examples=200)
@given(st.dictionaries(st.integers(0, 12), st.dictionaries(st.integers(0, 150), st.integers(1, 5), min_size=1),
                       min_size=1),
       st.lists(st.integers(0, 15), min_size=1, max_size=6, unique=True),
       st.lists(st.integers(0, 160), min_size=1, max_size=12, unique=True), st.sampled_from([1, 2, 4, 64]),
       st.sampled_from([0, 16]))
def test_counts_at_finds_every_posting_and_nothing_else(postings, keys, slots, stride, one_by_one):
    """`counts_at` searches the sampled key·span + slot values first, then within one window (or, for
    a few keys, each key's postings on their own); any stride, keys unknown to the segment and slots
    past its last all give the brute-force answer, either way."""
    triples = sorted((key, slot, tf) for key, by_slot in postings.items() for slot, tf in by_slot.items())
    key_of, slot_of, tf_of = (np.array(column) for column in zip(*triples))
    segment = index_module._Segment.build(key_of, slot_of, tf_of.astype(np.float64), max(postings) + 1)
    wanted = np.array(sorted(slots))
    with mock.patch.object(tuning, "SAMPLE_STRIDE", stride), mock.patch.object(tuning, "KEYS_ONE_BY_ONE", one_by_one):
        got = segment.counts_at(np.array(keys), wanted)
    assert got.tolist() == [[postings.get(k, {}).get(s, 0) for s in wanted.tolist()] for k in keys]


def test_dense_terms_from_one_eighth_of_the_records_only_when_their_vectors_fit():
    contributions = index_module._Contributions(budget=1600)
    doc_freq = np.array([13, 30, 5, 0])  # of 100 records: two keys in ≥ 1/8, one of them in ≥ 1/4
    assert contributions.dense_fraction(doc_freq, 100) == 8  # 2 vectors of 100 float32 = 800 B ≤ 1600 / 2
    contributions.budget = 1599
    assert contributions.dense_fraction(doc_freq, 100) == 4


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), queries, st.integers(1, 6), st.lists(st.integers(0, 40), max_size=4), st.sampled_from([0, 90]))
def test_a_dense_terms_counts_as_bytes_are_its_postings(records, q, limit, churn, repeated):
    """A short query's dense terms give the exact step their counts from a byte per slot: each is the
    count its postings hold (0 where none), at every slot, dead ones too; a count past a byte
    (`repeated` 90 words ×3 for the name's weight: 270) leaves the term to the search, and the
    ranking is the full one cut either way."""
    if repeated:
        records = [*records, parse_record({"id": "zz-many", "name": " ".join(["rope"] * repeated)})]
    index = _churned(records, churn)
    _same(index.rank(_query(q, limit=limit)), index.rank(_query(q))[:limit])
    keys = np.flatnonzero(index._terms.doc_freq > 0)
    slots = np.arange(index._columns.size)
    for key in keys[index._dense(keys)].tolist():
        counts = index._contributions.counts(index._layout, index._terms.segments, key, slots.size)
        want = np.zeros(slots.size)
        for segment in index._terms.segments:
            found = segment.postings(key)
            if found is not None:
                want[found[0]] = found[1]
        if want.max() >= 256:
            assert counts is None
        else:
            assert counts.dtype == np.uint8 and counts.tolist() == want.tolist()
