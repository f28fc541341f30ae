"""The embedder setting through the real server: find-related re-ordered by a real `/v1/embeddings`
service on 127.0.0.1, and a service that is down leaving the plain order."""

from __future__ import annotations

from pathlib import Path

from conftest import small_workspace
from embedder_support import Embeddings, service  # noqa: F401 (a fixture)

CODE = '''def classifier_loss(logits, targets, eps):
    """the training loss of the classifier"""
    return cross_entropy(logits, targets, eps)
'''

POOL = '''- id: exp-1
  name: label-smoothing-0.1
  finished_at: 2026-11-01T00:00:00Z
  conclusion: smoothing with eps 0.1 helps the loss
- id: exp-2
  name: rope-theta-1m
  finished_at: 2026-11-02T00:00:00Z
  conclusion: rope theta 1m, cross entropy of the logits and targets of the classifier in training improves
'''

LOW_GATE = {"hover": {"minScore": 0.2}}  # the records' ages grow with the wall clock: keep both in


def workspace(tmp_path: Path) -> Path:
    return small_workspace(tmp_path / "embed", POOL, {"loss.py": CODE})


async def find_related(session) -> list[str]:
    uri = session.open("loss.py")
    found = await session.command("soma.findRelatedExperiments", {"uri": uri, "position": {"line": 0, "character": 6}})
    return [r["id"] for r in found]


async def test_an_embedding_service_reorders_find_related(start_session, tmp_path, service):  # noqa: F811
    root = workspace(tmp_path)
    plain = await start_session(workspace=root, init_options=LOW_GATE)
    assert await find_related(plain) == ["exp-2", "exp-1"]  # more of the code's words
    embedded = await start_session(workspace=root, init_options={**LOW_GATE, "embedder": {"url": service, "weight": 1.0}})
    assert await find_related(embedded) == ["exp-1", "exp-2"]  # the query names smoothing's `eps`
    assert any(asked["path"] == "/v1/embeddings" for asked in Embeddings.asked)


async def test_a_service_that_is_down_leaves_the_plain_order(start_session, tmp_path):
    session = await start_session(workspace=workspace(tmp_path),
                                  init_options={**LOW_GATE, "embedder": {"url": "http://127.0.0.1:9", "weight": 1.0}})
    assert await find_related(session) == ["exp-2", "exp-1"]
