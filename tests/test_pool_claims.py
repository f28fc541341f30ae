"""`pool.claims`: one claim packed without a list, several as a sorted list, and back."""

import pytest

from soma_lsp.pool.claims import Claims


def test_one_claim_is_held_packed_and_several_in_path_order():
    claims = Claims()
    claims.add("a", "/p/a.json", 0)
    claims.add("b", "/p/b.jsonl", 3)
    assert claims.held == {"a": "/p/a.json", "b": ("/p/b.jsonl", 3)}
    assert claims.of("a") == [("/p/a.json", 0)] and claims.first("b") == ("/p/b.jsonl", 3)
    claims.add("a", "/p/0.jsonl", 5)
    claims.add("a", "/p/z.json", 0)
    assert claims.of("a") == [("/p/0.jsonl", 5), ("/p/a.json", 0), ("/p/z.json", 0)]
    copy = claims.copy()
    claims.remove("a", "/p/0.jsonl", 5)
    claims.remove("a", "/p/z.json", 0)
    assert claims.held["a"] == "/p/a.json" and copy.first("a") == ("/p/0.jsonl", 5)
    claims.remove("a", "/p/a.json", 0)
    assert "a" not in claims.held and claims.of("a") == [] and len(claims) == 1
    with pytest.raises(ValueError):
        claims.remove("b", "/p/b.jsonl", 4)
