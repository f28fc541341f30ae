"""docs/spec.md §2, term by term on hand-computed cases, then the whole ranking against the spec reference."""

import math
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from soma_lsp.records import parse_record
from soma_lsp.retrieval import (
    DEAD_END_IMPORTANCE_FLOOR, DEFAULT_WEIGHTS, LiveIndex, RetrievalQuery, canonical_component,
    component_bag, dead_end_reason, embedding_text, importance, is_dead_end, rank,
)
from soma_lsp.retrieval.index.kept import kept

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def rec(id="exp-1", name="run", **fields):
    return parse_record({"id": id, "name": name, **fields})


def only(results, record_id):
    return next(r for r in results if r.record.id == record_id)


# -- lexical ------------------------------------------------------------------------------------

def test_bm25_by_hand():
    # docs: a = "rope"×3 (name) → dl 3, tf 3; b = "theta"×3 → dl 3; avgdl 3, N 2, n_rope 1.
    records = [rec("a", "rope"), rec("b", "theta")]
    result = rank(records, RetrievalQuery(text="rope", limit=None))
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    bm25_a = idf * 3 * 2.2 / (3 + 1.2)
    assert bm25_a > 0
    assert only(result, "a").components.lexical == 1.0
    assert only(result, "b").components.lexical == 0.0
    # importance 0 for both; weights redistribute to lexical 0.4/0.6, importance 0.2/0.6
    assert only(result, "a").score == pytest.approx(0.4 / 0.6)


def test_field_repetition_and_length_normalisation():
    # name ×3, headline ×2, notes ×1: "rope" once in each field of different records.
    records = [rec("n", "rope"), rec("h", "x", conclusion="rope"), rec("o", "x", notes="rope")]
    lex = {r.record.id: r.components.lexical for r in rank(records, RetrievalQuery(text="rope", limit=None))}
    # dl: n=3, h=3+2=5, o=3+1=4; avgdl=4; idf equal for all.
    def tf_part(tf, dl):
        return tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / 4))
    top = tf_part(3, 3)
    assert lex["n"] == pytest.approx(1.0)
    assert lex["h"] == pytest.approx(tf_part(2, 5) / top)
    assert lex["o"] == pytest.approx(tf_part(1, 4) / top)


def test_query_terms_are_distinct():
    records = [rec("a", "rope scaling"), rec("b", "theta")]
    once = rank(records, RetrievalQuery(text="rope", limit=None))
    thrice = rank(records, RetrievalQuery(text="rope rope ROPE", limit=None))
    assert [(r.record.id, r.score) for r in once] == [(r.record.id, r.score) for r in thrice]


def test_lexical_does_not_apply_without_query_terms():
    result = rank([rec("a", "rope")], RetrievalQuery(text="  -- ", limit=None))
    assert result[0].components.lexical is None
    assert result[0].components.weights["lexical"] == 0.0


def test_lexical_is_zero_everywhere_when_nothing_matches():
    result = rank([rec("a", "rope"), rec("b", "theta")], RetrievalQuery(text="unrelated", limit=None))
    assert all(r.components.lexical == 0.0 for r in result)


def test_matched_terms_in_query_order():
    r = rank([rec("a", "rope-theta-500k", notes="diverges")], RetrievalQuery(text="theta diverges rope gelu"))[0]
    assert r.components.matched_terms == ("theta", "diverges", "rope")


# -- recency ------------------------------------------------------------------------------------

def recency(days_ago: float, half_life_days: float = 30.0) -> float:
    """The recency `rank` gives a record that finished `days_ago` days before the query's `now`."""
    finished = (NOW - timedelta(days=days_ago)).isoformat()
    query = RetrievalQuery(now=NOW, half_life_days=half_life_days)
    return rank([rec(finished_at=finished)], query)[0].components.recency


def test_recency_halves_each_half_life():
    assert recency(30) == pytest.approx(0.5)
    assert recency(60, 30.0) == pytest.approx(0.25)
    assert recency(10, 10.0) == pytest.approx(0.5)


def test_a_record_from_the_future_scores_one():
    assert recency(-3) == 1.0
    r = rank([rec(created_at="2030-01-01T00:00:00Z")], RetrievalQuery(now=NOW))[0]
    assert r.components.recency == 1.0


@pytest.mark.parametrize("half_life", [0, -1.0])
def test_half_life_must_be_positive(half_life):
    with pytest.raises(ValueError, match="half_life_days"):
        RetrievalQuery(now=NOW, half_life_days=half_life)


def test_recency_uses_finished_else_created_and_naive_is_utc():
    a = rec("a", created_at="2026-05-01T00:00:00", finished_at="2026-05-02T00:00:00")
    b = rec("b", created_at="2026-05-02T02:00:00+02:00")
    result = rank([a, b], RetrievalQuery(now=NOW, limit=None))
    assert only(result, "a").components.recency == only(result, "b").components.recency


def test_recency_does_not_apply_without_now_or_time():
    result = rank([rec("a", created_at="2026-05-01T00:00:00Z"), rec("b")], RetrievalQuery(now=NOW, limit=None))
    assert only(result, "b").components.recency is None
    assert only(result, "b").components.weights["recency"] == 0.0
    assert all(r.components.recency is None for r in rank([rec("a", created_at="2026-05-01")], RetrievalQuery()))


# -- structural ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["torch.nn.LayerNorm", "layer_norm", "Layer-Norm", "LayerNorm"])
def test_component_canonicalisation(name):
    assert canonical_component(name) == "layernorm"


def test_component_bag_counts_and_merges():
    assert component_bag(["Linear", "nn.Linear", "RMSNorm"]) == {"linear": 2.0, "rmsnorm": 1.0}
    assert component_bag({"Linear": 2, "linear": 1, "": 3, "Dropout": 0, "GELU": -1}) == {"linear": 3.0}


def test_weighted_jaccard_by_hand():
    r = rec(architecture={"Linear": 4, "RMSNorm": 2, "Attention": 1})
    q = RetrievalQuery(architecture={"nn.Linear": 2, "rms_norm": 2, "SwiGLU": 1})
    got = rank([r], q)[0].components
    # min: linear 2 + rmsnorm 2 = 4; max: linear 4 + rmsnorm 2 + attention 1 + swiglu 1 = 8
    assert got.structural == pytest.approx(0.5)
    assert got.shared_components == ("linear", "rmsnorm")


def test_structural_applies_only_when_both_sides_have_architecture():
    q = RetrievalQuery(architecture=["Linear"])
    result = rank([rec("a", architecture=["Conv2d"]), rec("b")], q)
    assert only(result, "a").components.structural == 0.0
    assert only(result, "b").components.structural is None
    assert rank([rec("a", architecture=["Linear"])], RetrievalQuery())[0].components.structural is None


# -- importance and dead ends -------------------------------------------------------------------

@pytest.mark.parametrize("status", ["failed", "crashed", "regressed", "error"])
def test_dead_end_by_status(status):
    assert is_dead_end(rec(status=status))


def test_dead_end_by_metrics():
    wrong = [{"name": "loss", "value": 2.5, "baseline": 2.0, "goal": "min"},
             {"name": "acc", "value": 0.6, "baseline": 0.7, "goal": "max"}]
    assert is_dead_end(rec(status="succeeded", metrics=wrong))
    mixed = wrong + [{"name": "tput", "value": 9, "baseline": 8, "goal": "max"}]
    assert not is_dead_end(rec(metrics=mixed))
    assert not is_dead_end(rec(metrics=[{"name": "loss", "value": 2.0, "baseline": 2.0, "goal": "min"}]))
    assert is_dead_end(rec(metrics=[{"name": "loss", "value": "nan", "baseline": 2.0, "goal": "min"}]))
    # metrics without baseline or goal are not judged
    assert not is_dead_end(rec(metrics=[{"name": "loss", "value": 3.0, "goal": "min"}]))
    assert is_dead_end(rec(metrics=wrong + [{"name": "x", "value": 1.0}]))


def test_a_dead_end_says_which_rule_made_it_one():
    assert dead_end_reason(rec(status="crashed")) == "status crashed"
    wrong = [{"name": "val_loss", "value": 3.1, "baseline": 2.9, "goal": "min"},
             {"name": "tokens_per_s", "value": 91234.5, "baseline": 120000, "goal": "max"},
             {"name": "unjudged", "value": 1.0}]
    assert dead_end_reason(rec(status="succeeded", metrics=wrong)) == (
        "every metric moved the wrong way: val_loss 3.10 vs 2.90 (min), tokens_per_s 91234.5 vs 120000 (max)")
    assert dead_end_reason(rec(metrics=[{"name": "loss", "value": "nan", "baseline": 2.0, "goal": "min"}])) == (
        "every metric moved the wrong way: loss nan vs 2.00 (min)")
    assert dead_end_reason(rec(status="succeeded", metrics=wrong[:1] + [
        {"name": "acc", "value": 0.8, "baseline": 0.7, "goal": "max"}])) is None


def test_importance_by_hand():
    assert importance(rec()) == 0.0
    assert importance(rec(conclusion="works")) == 0.5
    assert importance(rec(conclusion="works", notes="n")) == pytest.approx(0.7)
    assert importance(rec(conclusion={"headline": "h", "details": "d"})) == pytest.approx(0.7)
    # effect: |2.1 - 2.0| / 2.0 / 0.10 = 0.5 → 0.3 * 0.5
    half = rec(metrics=[{"name": "loss", "value": 2.1, "baseline": 2.0, "goal": "max"}])
    assert importance(half) == pytest.approx(0.15)
    big = rec(metrics=[{"name": "loss", "value": 5.0, "baseline": 2.0}])
    assert importance(big) == pytest.approx(0.3)
    assert importance(rec(metrics=[{"name": "loss", "value": "inf", "baseline": 2.0}])) == pytest.approx(0.3)
    zero_baseline = rec(metrics=[{"name": "d", "value": 1e-14, "baseline": 0.0}])
    assert importance(zero_baseline) == pytest.approx(0.3 * 0.1)
    assert importance(rec(importance=0.33, conclusion="h", notes="n")) == 0.33


def test_dead_end_floor_needs_a_headline():
    assert importance(rec(status="failed", conclusion="diverged")) == DEAD_END_IMPORTANCE_FLOOR
    assert importance(rec(status="failed")) == 0.0
    assert importance(rec(status="failed", conclusion="d", importance=0.1)) == DEAD_END_IMPORTANCE_FLOOR
    assert importance(rec(status="failed", conclusion="d", importance=0.95)) == 0.95


# -- weights, order -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, arch, now, rec_arch, rec_time, applies", [
    ("rope", ["Linear"], NOW, ["Linear"], "2026-05-01", "LSRI"),
    ("rope", ["Linear"], NOW, ["Linear"], None, "LSI"),
    ("rope", ["Linear"], NOW, None, "2026-05-01", "LRI"),
    ("rope", None, None, ["Linear"], "2026-05-01", "LI"),
    ("", ["Linear"], NOW, ["Linear"], "2026-05-01", "SRI"),
    ("", None, NOW, None, "2026-05-01", "RI"),
    ("", ["Linear"], None, ["Linear"], None, "SI"),
    ("", None, None, None, None, "I"),
])
def test_weight_redistribution(text, arch, now, rec_arch, rec_time, applies):
    r = rec(name="rope", architecture=rec_arch, created_at=rec_time, conclusion="h")
    got = rank([r], RetrievalQuery(text=text, architecture=arch, now=now))[0].components
    letters = dict(zip("LSRI", ("lexical", "structural", "recency", "importance")))
    total = sum(DEFAULT_WEIGHTS.as_dict()[letters[c]] for c in applies)
    for letter, term in letters.items():
        expected = DEFAULT_WEIGHTS.as_dict()[term] / total if letter in applies else 0.0
        assert got.weights[term] == pytest.approx(expected)
        assert (getattr(got, term) is not None) == (letter in applies)
    assert sum(got.weights.values()) == pytest.approx(1.0)


def test_custom_weights():
    r = rec(name="rope")
    got = rank([r], RetrievalQuery(text="rope", weights={"lexical": 1.0, "structural": 0, "recency": 0,
                                                          "importance": 0}))[0]
    assert got.score == 1.0
    with pytest.raises(ValueError):
        RetrievalQuery(weights={"lexical": -1})
    with pytest.raises(ValueError):
        RetrievalQuery(weights={"lexical": 0, "structural": 0, "recency": 0, "importance": 0})
    with pytest.raises(ValueError, match="unknown"):
        RetrievalQuery(weights={"semantic": 1})


def test_ties_break_on_id():
    twins = [rec(i, "rope", conclusion="same") for i in ("c", "a", "b")]
    result = rank(twins, RetrievalQuery(text="rope", now=NOW))
    assert [r.record.id for r in result] == ["a", "b", "c"]
    assert len({r.score for r in result}) == 1


def test_limit():
    records = [rec(f"r{i}", f"run {i}") for i in range(20)]
    assert len(rank(records, RetrievalQuery())) == 10
    assert len(rank(records, RetrievalQuery(limit=None))) == 20
    assert rank(records, RetrievalQuery(limit=0)) == []
    assert rank([], RetrievalQuery(text="x")) == []


def test_embedding_text_is_fields_once():
    r = rec(name="rope", conclusion={"headline": "diverges", "details": "at 2k"}, notes="theta 500k")
    assert embedding_text(r) == "rope\ndiverges\ntheta 500k\nat 2k"


# -- live index ---------------------------------------------------------------------------------

def _scores(index_or_records, query):
    return [(r.record.id, round(r.score, 12), r.components) for r in rank(index_or_records, query)]


def test_live_updates_equal_a_fresh_build():
    base = [rec(f"r{i}", f"rope theta {i}", notes="x " * i, architecture=["Linear"] * (i % 3),
                created_at=f"2026-0{1 + i % 5}-01") for i in range(30)]
    index = LiveIndex(base[:20])
    index.update(add=base[20:])
    index.update(remove=["r3", "r4", "nope"])
    changed = rec("r5", "completely new text", conclusion="lesson")
    index.update(add=[changed])
    expected = [r for r in base if r.id not in ("r3", "r4", "r5")] + [changed]
    q = RetrievalQuery(text="rope theta new lesson 7", architecture=["Linear"], now=NOW, limit=None)
    assert _scores(index, q) == _scores(expected, q)
    assert len(index) == len(expected) and "r3" not in index and index.get("r5") == changed


def test_many_small_updates_and_compaction_keep_results_exact():
    index = LiveIndex()
    rng = random.Random(7)
    alive = {}
    for step in range(3000):
        i = rng.randrange(400)
        if rng.random() < 0.3 and alive:
            victim = rng.choice(sorted(alive))
            index.update(remove=[victim])
            del alive[victim]
        else:
            r = rec(f"r{i}", f"run {rng.choice(['rope', 'moe', 'lr'])} {step}", architecture=["Linear"])
            index.update(add=[r])
            alive[r.id] = r
    q = RetrievalQuery(text="rope moe", architecture=["Linear"], now=NOW, limit=None)
    assert _scores(index, q) == _scores(list(alive.values()), q)


def test_a_results_kept_components_follow_its_record():
    """`_scored` keeps each result's record's components per slot and layout: a record replaced, and
    slots renumbered by a compaction, must give the shared components of the record there now."""
    names = ["Linear", "Conv", "RMSNorm", "Attention"]

    def arch(i):
        return [names[j] for j in range(4) if i >> j & 1]
    records = [rec(f"r{i:04d}", f"run {i}", architecture=arch(i)) for i in range(2100)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="run", architecture=names, now=NOW, limit=None)
    assert _scores(index, q) == _scores(records, q)  # every slot's components kept
    changed = rec("r2099", "run 2099", architecture=["Conv"])
    index.update(add=[changed])
    index.update(remove=[r.id for r in records[:1100]])  # past half of the slots dead: compacted
    left = records[1100:2099] + [changed]
    assert _scores(index, q) == _scores(left, q)
    assert only(rank(index, q), "r1100").components.shared_components == ("attention", "rmsnorm")


def test_a_words_kept_key_and_idf_follow_the_records():
    """`_known` keeps each query word's key and idf (or that no record holds it) while the layout
    stands: records added — one with a word no record held before — must move both."""
    records = [rec(f"r{i}", f"rope theta {i}", notes="warmup " * (i % 3)) for i in range(40)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope warmup cosine", now=NOW, limit=None)
    assert _scores(index, q) == _scores(records, q)  # "cosine": no record holds it
    added = [rec("n1", "cosine schedule"), rec("n2", "rope cosine warmup")]
    index.update(add=added)
    assert _scores(index, q) == _scores(records + added, q)
    assert only(rank(index, q), "n1").components.matched_terms == ("cosine",)


def test_a_words_kept_density_follows_the_records():
    """`_known` keeps whether each word is added as a dense vector too (`_approximate` and the exact
    step's counts read it from the resolved query): a word in few records that records added make
    common must be dense once they are."""
    records = [rec(f"r{i}", f"rope theta {i}", notes="cosine" if i < 2 else "") for i in range(40)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope cosine", now=NOW, limit=3)
    resolved = index._resolve(q)
    assert resolved.dense == index._dense(resolved.keys).tolist() == [True, False]
    index.update(add=[rec(f"c{i}", "cosine schedule") for i in range(20)])
    resolved = index._resolve(q)
    assert resolved.dense == index._dense(resolved.keys).tolist() == [True, True]
    assert _scores(index, q) == _scores(records + [rec(f"c{i}", "cosine schedule") for i in range(20)], q)


def test_a_kept_architecture_follows_the_records():
    """`_bag_of` keeps a query architecture's bag and its components' keys while the layout stands: a
    component no record held, asked, must be found once a record holding it is added; and an
    architecture that cannot be a dict key is resolved alike."""
    records = [rec(f"r{i}", f"rope theta {i}", architecture=["Linear"]) for i in range(10)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope", architecture=["MoE", "Linear"], now=NOW, limit=None)
    assert _scores(index, q) == _scores(records, q)
    added = [rec("m1", "rope", architecture=["MoE"])]
    index.update(add=added)
    assert _scores(index, q) == _scores(records + added, q)
    assert only(rank(index, q), "m1").components.shared_components == ("moe",)
    unhashable = RetrievalQuery(text="rope", architecture=[["MoE", 2.0], ["Linear", 1.0]], now=NOW, limit=None)
    assert _scores(index, unhashable) == _scores(records + added, unhashable)


def test_a_bags_kept_plane_masks_follow_the_records():
    """The bit planes give the most frequent components the first bits, and a bag's masks in them are kept
    per layout (`planes`, made by `warm` only): records added that make another component the most frequent
    must move both — masks kept from before would count the other component."""
    records = [rec(f"r{i}", f"rope {i}", architecture=["Linear"]) for i in range(10)]
    records += [rec(f"m{i}", f"rope m{i}", architecture=["MoE", "MoE"]) for i in range(2)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope", architecture=["MoE", "MoE", "Attention"], now=NOW, limit=4)
    index.rank(q)
    assert "planes" not in index._per_layout()  # a query never makes them: only a load's `warm`
    index.warm([])
    assert index._planes_shared(index._resolve(q), np.arange(3), np.float64) is not None
    assert _scores(index, q) == _scores(records, q)
    added = [rec(f"n{i}", f"rope n{i}", architecture=["MoE"]) for i in range(20)]
    index.update(add=added)
    assert index._planes_shared(index._resolve(q), np.arange(3), np.float64) is None  # a new layout: none yet
    index.warm([])
    assert _scores(index, q) == _scores(records + added, q)
    assert [r.record.id for r in rank(index, q)][:2] == ["m0", "m1"]  # two MoE shared, the most


def test_each_result_owns_its_weights():
    """Each result's `weights` is a copy of its class's effective weights, kept per weighting: a caller
    changing one result's changes no other result's, nor the next ranking's."""
    records = [rec(f"r{i}", f"rope theta {i}") for i in range(5)]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope", now=NOW, limit=3)
    first, second = rank(index, q)[:2]
    expected = dict(second.components.weights)
    first.components.weights["lexical"] = -1.0
    assert second.components.weights == expected
    assert [r.components.weights for r in rank(index, RetrievalQuery(text="theta", now=NOW, limit=3))] == [expected] * 3


def test_the_kept_words_overflowing_lose_no_word_of_the_query_asked(monkeypatch):
    """When a query's new words would take the kept words past TERMS_KEPT they are emptied: the words
    this query asks that were kept already must still be answered (a KeyError here failed a request
    once per overflow), and a query of more new words than the bound keeps none of them."""
    from soma_lsp.retrieval.index import tuning

    records = [rec(f"r{i}", f"rope theta warmup {i}", notes="cosine decay clip") for i in range(30)]
    index = LiveIndex(records)
    monkeypatch.setattr(tuning, "TERMS_KEPT", 3)
    first = RetrievalQuery(text="rope theta", now=NOW, limit=None)
    assert _scores(index, first) == _scores(records, first)
    mixed = RetrievalQuery(text="rope theta warmup cosine", now=NOW, limit=None)  # two kept, two new: 4 > 3
    assert _scores(index, mixed) == _scores(records, mixed)
    wide = RetrievalQuery(text="rope theta warmup cosine decay clip", now=NOW, limit=None)
    assert _scores(index, wide) == _scores(records, wide)
    assert len(index._per_layout()["terms"]) <= 3

def test_relevant_only_and_min_score_gate():
    records = [rec("a", "rope"), rec("b", "other", conclusion="big lesson", notes="n"),
               rec("c", "x", architecture=["Linear"])]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope", architecture=["Linear"])
    assert {r.record.id for r in index.rank(q)} == {"a", "b", "c"}
    assert [r.record.id for r in index.rank(q, relevant_only=True)] == ["a", "c"]
    assert [r.record.id for r in index.rank(q, relevant_only=True, min_score=0.5)] == ["a"]


def test_score_gives_ranks_scores_for_chosen_ids():
    records = [rec("a", "rope"), rec("b", "theta"), rec("c", "rope theta")]
    index = LiveIndex(records)
    q = RetrievalQuery(text="rope theta", now=NOW)
    ranked = {r.record.id: r.score for r in index.rank(q)}
    assert {r.record.id: r.score for r in index.score(q, ["b", "zzz", "a"])} == {"b": ranked["b"], "a": ranked["a"]}


def test_tied_to():
    records = [rec("a", code=["train.py"]), rec("b", code=["train.py::train", "model/moe.py"]), rec("c")]
    index = LiveIndex(records)
    assert [r.id for r in index.tied_to("train.py")] == ["a", "b"]
    index.update(remove=["a"])
    assert [r.id for r in index.tied_to("train.py")] == ["b"]
    assert index.tied_to("nope.py") == []


def test_queries_never_see_half_an_update():
    import threading

    def version(word):
        return [rec(f"r{i:03d}", f"{word} run {i}") for i in range(200)]

    index = LiveIndex(version("alpha"))
    stop = threading.Event()

    def writer():
        flip = False
        while not stop.is_set():
            index.update(add=version("beta" if flip else "alpha"))
            flip = not flip

    thread = threading.Thread(target=writer)
    thread.start()
    seen = set()
    try:
        for _ in range(5000):
            if seen == {0, 200}:
                break
            matching = sum(r.components.lexical > 0 for r in index.rank(RetrievalQuery(text="alpha", limit=None)))
            assert matching in (0, 200)
            assert len(index) == 200
            seen.add(matching)
    finally:
        stop.set()
        thread.join()
    assert seen == {0, 200}


def test_what_the_index_keeps_is_bounded_and_drops_the_least_recently_used_first():
    cache: dict = {}
    made = []

    def get(key: str) -> str:
        def make() -> str:
            made.append(key)
            return key.upper()
        return kept(cache, key, make, 2)

    assert [get(k) for k in ("a", "b", "a", "c")] == ["A", "B", "A", "C"]
    assert made == ["a", "b", "c"] and list(cache) == ["a", "c"]  # "a" used again, so "b" went first
    assert get("b") == "B" and made == ["a", "b", "c", "b"] and list(cache) == ["c", "b"]


def test_a_warmed_index_makes_nothing_a_query_of_a_warmed_shape_needs_and_ranks_the_same(monkeypatch):
    records = [rec(f"exp-{i}", f"rope theta {i}", created_at=f"2026-0{1 + i % 5}-01T00:00:00Z",
                   architecture=["linear"] if i % 2 else None) for i in range(40)]
    asked = RetrievalQuery(text="rope", architecture=("linear", "conv"), now=NOW, limit=5)
    cold = LiveIndex(records).rank(asked)
    index = LiveIndex(records)
    index.warm([RetrievalQuery(text="warm", architecture=("warm",), now=NOW)])
    (linear,) = index._components.keys_of([canonical_component("linear")]).tolist()
    assert index._per_layout()["presence"][linear] is not None  # a common component's, made for any bag
    for made_once_per_layout in ("_new_weighting", "_assembled_static_part"):
        monkeypatch.setattr(type(index), made_once_per_layout, lambda *a, **k: pytest.fail("made again"))
    assert index.rank(asked) == cold
    index.update(add=[rec("exp-new", "rope")])  # a new layout: made again by the query that needs it
    with pytest.raises(pytest.fail.Exception):
        index.rank(asked)


def test_a_warm_makes_the_contributions_of_the_words_it_is_given_and_ranks_the_same(monkeypatch):
    """`warm` with the texts of the questions about to be asked makes their words' contributions, sparse
    (per segment) and dense alike, as the query would take them: the query makes none and ranks as a
    cold index does. Words no record holds are skipped."""
    from soma_lsp.retrieval.index import contributions

    records = [rec(f"exp-{i}", f"rope {'theta' if i % 10 == 0 else 'gate'} {i}") for i in range(40)]
    asked = RetrievalQuery(text="rope theta gate", now=NOW, limit=5)
    cold = LiveIndex(records[:20])
    cold.update(add=records[20:])
    answer = cold.rank(asked)
    index = LiveIndex(records[:20])
    index.update(add=records[20:])  # two segments
    index.warm([], ["def f(): rope + theta", "gate unheard"])
    rope, theta, gate = index._terms.keys_of(["rope", "theta", "gate"]).tolist()
    assert index._dense(np.array([rope, theta, gate])).tolist() == [True, False, True]  # theta: 4 records in 40
    assert set(index._contributions.parts) == {("dense", rope), ("dense", gate),
                                                *((segment, theta) for segment in index._terms.segments)}
    assert len(index._terms.segments) == 2
    monkeypatch.setattr(contributions, "_approximate_contribution", lambda *a: pytest.fail("made again"))
    assert index.rank(asked) == answer


def test_a_warm_fills_at_most_a_share_of_the_contribution_budget(monkeypatch):
    """The words are made in their order until the cache holds 1/WARM_SHARE of its budget: a budget
    whose share one word's contributions fill leaves the second word for its query."""
    from soma_lsp.retrieval.index import tuning

    index = LiveIndex([rec(f"exp-{i}", f"rope theta {i}") for i in range(400)])
    (rope, theta) = index._terms.keys_of(["rope", "theta"]).tolist()
    index._contributions.budget = tuning.WARM_SHARE * 4 * 400  # one word's float32 contributions
    index.warm([], ["theta rope"])
    assert [key for _, key in index._contributions.parts] == [theta]
