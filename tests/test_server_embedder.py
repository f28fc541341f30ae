"""The Embedder seam (issue 20): a real HTTP server on 127.0.0.1 speaking `/v1/embeddings`, Python entry
points, wordllama when it is installed, and the re-ranking it may do — never more than re-order."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from embedder_support import Embeddings, service, toy_vector  # noqa: F401 (a fixture)

from soma_lsp.query import ALL_ON
from soma_lsp.records import parse_record
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from soma_lsp.server.embedder import (EmbedderError, HttpEmbedder, Reranker, cosine, load_entry_point,
                                      reranker, similarity_for)
from soma_lsp.server.related import find_related
from soma_lsp.server.settings import parse

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
def pool():
    raw = [
        {"id": "smooth", "name": "label-smoothing-0.1", "conclusion": "smoothed targets eps 0.1 help the loss",
         "finished_at": "2026-11-01T00:00:00Z"},
        {"id": "rope", "name": "rope-theta-1m", "conclusion": "rotary theta 1m helps the loss",
         "finished_at": "2026-11-02T00:00:00Z"},
        {"id": "drop", "name": "dropout-0.1", "conclusion": "dropout 0.1 hurts the loss",
         "finished_at": "2026-11-03T00:00:00Z"},
    ]
    raw += [{"id": f"f{i}", "name": f"filler-{i}", "conclusion": f"unrelated run {i}",
             "finished_at": "2026-11-20T00:00:00Z"} for i in range(6)]
    return LiveIndex([parse_record(r) for r in raw])


def test_http_embedder_speaks_v1_embeddings(service):
    vectors = HttpEmbedder(service, model="toy-1").embed(["label smoothing", "rope theta"])
    assert vectors == [toy_vector("label smoothing"), toy_vector("rope theta")]  # put back in order
    assert Embeddings.asked == [{"path": "/v1/embeddings", "input": ["label smoothing", "rope theta"],
                                 "model": "toy-1"}]
    HttpEmbedder(f"{service}/v1/embeddings").embed(["x"])  # a full endpoint is used as it is
    assert Embeddings.asked[-1] == {"path": "/v1/embeddings", "input": ["x"]}  # no model: none sent
    with pytest.raises(EmbedderError, match="not a /v1/embeddings answer|404|Not Found"):
        HttpEmbedder(f"{service}/elsewhere/embeddings").embed(["x"])


def test_an_unreachable_service_is_an_error_that_says_where():
    with pytest.raises(EmbedderError, match="127.0.0.1:9"):
        HttpEmbedder("http://127.0.0.1:9", timeout=2).embed(["x"])


def test_the_similarity_only_reorders_the_gated_ranking(service):
    index = pool()
    query = RetrievalQuery(text="loss eps smoothing", now=NOW, limit=None)
    plain = find_related(index, query, (), min_score=0.0, limit=None, min_terms=1,
                         levers=replace(ALL_ON, siblings=False))
    assert [s.record.id for s, _ in plain.shown(3)][:1] != ["rope"]
    toward_rope = Reranker(HttpEmbedder(service), weight=1.0).similarity("rotary rope theta")
    moved = find_related(index, query, (), min_score=0.0, limit=None, min_terms=1,
                         levers=replace(ALL_ON, siblings=False), similarity=toward_rope)
    assert [s.record.id for s, _ in moved.shown(1)] == ["rope"]
    assert {s.record.id for s, _ in moved.shown(20)} == {s.record.id for s, _ in plain.shown(20)}  # no record added
    assert all(s.score == p.score for (s, _), (p, _) in zip(
        sorted(moved.shown(20), key=lambda x: x[0].record.id), sorted(plain.shown(20), key=lambda x: x[0].record.id)))


def test_record_vectors_are_cached(service):
    index = pool()
    ranked = index.rank(RetrievalQuery(text="loss", now=NOW, limit=None), relevant_only=True)
    bonus = Reranker(HttpEmbedder(service), weight=0.5)
    first = bonus.similarity("smoothing")(ranked)
    assert first["smooth"] == pytest.approx(0.5 * cosine(toy_vector("smoothing"), toy_vector(
        "label-smoothing-0.1\nsmoothed targets eps 0.1 help the loss")))
    bonus.similarity("dropout")(ranked)
    assert len(Embeddings.asked[-1]["input"]) == 1  # only the new query text: the records were kept


def test_a_failing_embedder_keeps_the_plain_order_and_says_why_once():
    index = pool()
    ranked = index.rank(RetrievalQuery(text="loss", now=NOW, limit=None), relevant_only=True)
    broken = Reranker(HttpEmbedder("http://127.0.0.1:9", timeout=2), weight=0.5)
    assert broken.similarity("x")(ranked) == {}
    assert broken.similarity("y")(ranked) == {}
    assert len(broken.problems) == 1 and "127.0.0.1:9" in broken.problems[0]


class Constant:
    def embed(self, texts):
        return [[1.0, 0.0] for _ in texts]


def make_constant():
    return Constant()


def test_entry_points_name_an_embedder_or_a_factory_and_say_what_is_wrong():
    assert isinstance(load_entry_point(f"{__name__}:make_constant"), Constant)
    assert isinstance(load_entry_point(f"{__name__}:Constant"), Constant)
    for spec, why in [("no_such_module_here:x", "No module named"), (f"{__name__}:nothing", "nothing"),
                      ("json:dumps", "TypeError"), ("json", "module:attribute"), ("math:pi", "neither")]:
        with pytest.raises(EmbedderError, match=why):
            load_entry_point(spec)


def test_settings_name_the_embedder_typed_and_checked(service):
    settings, problems = parse({"embedder": {"url": service, "model": "toy", "weight": 0.4}})
    assert problems == [] and (settings.embedder_url, settings.embedder_model, settings.embedder_weight) == (
        service, "toy", 0.4)
    assert similarity_for(settings, "smoothing") is not None
    default, problems = parse(None)
    assert problems == [] and similarity_for(default, "smoothing") is None  # off by default
    bad, problems = parse({"embedder.url": "ftp://x", "embedder.entryPoint": "not an entry point",
                           "embedder.weight": 3})
    assert (bad.embedder_url, bad.embedder_entry_point, bad.embedder_weight) == ("", "", 0.1)
    assert [p.split(":")[0] for p in problems] == ["soma.embedder.url", "soma.embedder.entryPoint",
                                                   "soma.embedder.weight"]
    assert reranker("", "", f"{__name__}:no_such", 0.1).similarity("x")(
        pool().rank(RetrievalQuery(text="loss", now=NOW, limit=None))) == {}  # reported, not raised


def test_wordllama_puts_a_paraphrase_nearer_than_another_idea():
    pytest.importorskip("wordllama")
    model = load_entry_point("soma_lsp.server.embedder:wordllama")
    query, paraphrase, other = model.embed(["label smoothing on the targets",
                                            "smoothed cross entropy with eps 0.1", "rotary position base theta"])
    assert len(query) == 256 and cosine(query, paraphrase) > cosine(query, other)
