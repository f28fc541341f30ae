"""Ties first and the gate, in process (the pure part every feature shares)."""

from __future__ import annotations

from datetime import datetime, timezone

from soma_lsp.query import Definition, Levers
from soma_lsp.records import parse_record
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from soma_lsp.server.convert import age, relative_to_folders
from soma_lsp.server.related import find_related, tie_points_at, tied_records

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
NO_LEVERS = Levers(**{name: False for name in Levers.names()})  # spec §3.5-3.6 as such (levers: test_server_evidence)


def definition(qualname: str) -> Definition:
    name = qualname.rsplit(".", 1)[-1]
    return Definition(name, qualname, "class", ((0, 0), (1, 0)), ((0, 6), (0, 6 + len(name))))


DEFS = [definition("Attention"), definition("Attention.forward"), definition("Block.forward")]


def test_tie_points_at_the_scope_its_parts_and_what_encloses_it():
    attention, forward = DEFS[0], DEFS[1]
    assert tie_points_at("Attention", attention, DEFS, file_scope_takes_all=False)
    assert tie_points_at("Attention.forward", attention, DEFS, file_scope_takes_all=False)  # enclosed
    assert tie_points_at("Attention", forward, DEFS, file_scope_takes_all=False)  # encloses
    assert not tie_points_at("Block.forward", attention, DEFS, file_scope_takes_all=False)
    # a tie to the whole file points at the file, not at each definition in it (docs/spec.md §3.6)
    assert not tie_points_at(None, attention, DEFS, file_scope_takes_all=False)
    assert tie_points_at(None, None, DEFS, file_scope_takes_all=False)
    assert not tie_points_at("Attention", None, DEFS, file_scope_takes_all=False)
    assert tie_points_at("Attention", None, DEFS, file_scope_takes_all=True)


def records():
    raw = [
        {"id": "a", "name": "rope-theta", "status": "failed", "conclusion": "rope theta diverges",
         "code": ["m.py::Attention"], "finished_at": "2026-11-01T00:00:00Z"},
        {"id": "b", "name": "rope-scaling", "conclusion": "rope scaling helps long context",
         "finished_at": "2026-11-20T00:00:00Z"},
        {"id": "c", "name": "unrelated", "conclusion": "batch size ramp", "code": ["other.py"]},
        {"id": "d", "name": "whole-file", "status": "crashed", "conclusion": "crashed", "code": ["m.py"]},
        {"id": "e", "name": "single-word", "conclusion": "theta only", "importance": 1},
    ]
    return [parse_record(r) for r in raw]


def test_ties_first_dead_ends_first_then_the_gated_rest():
    index = LiveIndex(records())
    tied = tied_records(index, "m.py", DEFS[1], DEFS, file_scope_takes_all=False)
    assert [t.record.id for t in tied] == ["a"]  # "d" is tied to the file as a whole, not to this definition
    whole = tied_records(index, "m.py", None, DEFS, file_scope_takes_all=True)
    query = RetrievalQuery(text="rope theta scaling long", now=NOW, limit=None)
    everything = find_related(index, query, whole, min_score=0.0, limit=None, levers=NO_LEVERS)
    assert [s.record.id for s in everything.tied] == ["a", "d"]  # the whole file's scope: both, dead ends by score
    assert all(s.dead_end for s in everything.tied)
    related = find_related(index, query, tied, min_score=0.0, limit=None, levers=NO_LEVERS)
    assert [s.record.id for s in related.tied] == ["a"]
    assert [s.record.id for s in related.ranked] == ["b"]  # "e" matches one word only: no evidence; "d" none
    one_word = find_related(index, query, (), min_score=0.0, limit=None, min_terms=1, levers=NO_LEVERS)
    assert "e" in [s.record.id for s in one_word.ranked]
    assert related.total == 2 and related.dead_ends == 1 and related.more(1) == 1


def test_relative_paths_and_ages(tmp_path):
    (tmp_path / "ws" / "pkg").mkdir(parents=True)
    assert relative_to_folders(str(tmp_path / "ws" / "pkg" / "m.py"), [str(tmp_path / "ws")]) == "pkg/m.py"
    assert relative_to_folders(str(tmp_path / "elsewhere.py"), [str(tmp_path / "ws")]) is None
    assert age(datetime(2026, 9, 1, tzinfo=timezone.utc), NOW) == "3 months ago"
    assert age(datetime(2026, 11, 30, 23, 0, tzinfo=timezone.utc), NOW) == "1 hour ago"
    assert age(datetime(2026, 12, 3, tzinfo=timezone.utc), NOW) == "in 2 days"
    assert age(None, NOW) == "no date"
