"""Following the index instead of reading it whole: the journal of what each update changed, the
records naming a commit, and what the server keeps from them (the commit ties' runs, the levers'
evidence table) — each equal, after any run of updates, to what a fresh read of the pool gives; and
background work stepping aside while a request is answered (`server.foreground`)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from soma_lsp.pool import live as live_pool, parts
from soma_lsp.records import parse_record
from soma_lsp.retrieval import LiveIndex
from soma_lsp.retrieval.index import live
from soma_lsp import foreground
from soma_lsp.server import evidence
from soma_lsp.server.commit_service import Runs, run_of

NAMES = ["lr-3e-4-1b", "lr-1e-3-1b", "rope-theta-1m", "rope-theta-10k", "warmup-2k", "baseline"]


def record(i: int, rng: random.Random):
    """A record whose name, settings, commit and prose (naming other runs) vary with `rng`."""
    other = rng.choice(NAMES)
    raw = {"id": f"r{i}", "name": rng.choice(NAMES), "status": rng.choice(["succeeded", "failed"]),
           "notes": f"lr={rng.choice(['3e-4', '1e-3'])} rope_theta={rng.choice(['1e6', '10000'])} re-run of {other}",
           "conclusion": rng.choice(["stable", "diverged at step 2k", f"see r{rng.randrange(40)}"])}
    if rng.random() < 0.5:
        raw["commit"] = rng.choice(["a1b2c3d", "e4f5a6b"])
    return parse_record(raw)


def updates(rng: random.Random, index: LiveIndex, rounds: int):
    """Random updates: records added, replaced and removed. Yields after each."""
    for _ in range(rounds):
        add = [record(rng.randrange(40), rng) for _ in range(rng.randrange(0, 6))]
        present = index.ids()
        remove = rng.sample(present, min(len(present), rng.randrange(0, 3)))
        index.update(add=add, remove=remove)
        yield


def test_the_journal_names_every_id_an_update_touched_and_gives_up_when_it_cannot_reach_back(monkeypatch):
    rng = random.Random(1)
    index = LiveIndex([record(i, rng) for i in range(20)])
    before = {r.id: repr(r) for r in index.records()}
    start = index.version
    for _ in updates(rng, index, 4):
        pass
    touched = index.changed_since(start)
    assert touched and set(before) - touched  # some changed, some did not
    assert all(repr(index.get(i)) == before[i] for i in set(before) - touched)  # nothing else moved
    assert index.changed_since(index.version) == set()
    assert index.changed_since(start, limit=0) is None  # more than asked for
    monkeypatch.setattr(live, "JOURNAL_UPDATES", 3)
    for _ in updates(rng, index, 5):
        pass
    assert index.changed_since(index.version - 3) is not None and index.changed_since(index.version - 4) is None


def test_the_ids_naming_a_commit_follow_adds_replacements_and_removals():
    rng = random.Random(2)
    index = LiveIndex([record(i, rng) for i in range(20)])
    for _ in updates(rng, index, 40):
        assert sorted(index.ids_naming_a_commit()) == sorted(r.id for r in index.records() if r.commit)
    copy = LiveIndex()
    copy.restore(index.export(), None)
    assert sorted(copy.ids_naming_a_commit()) == sorted(index.ids_naming_a_commit())


def test_the_commit_runs_followed_equal_the_runs_read_whole():
    rng = random.Random(3)
    index = LiveIndex([record(i, rng) for i in range(20)])
    runs = Runs()
    for _ in updates(rng, index, 40):
        version = runs.version
        followed = runs.follow(index)
        whole = tuple(run_of(r) for r in index.records() if r.commit)
        assert followed == whole
        assert [(r.settings, r.patch) for r in followed] == [(r.settings, r.patch) for r in whole]
        assert runs.follow(index) is followed and runs.version >= version  # nothing new: the same runs


def test_the_evidence_table_followed_answers_as_one_built_afresh():
    rng = random.Random(4)
    index = LiveIndex([record(i, rng) for i in range(20)])
    asked = [(("lr", "0.0003", "3e-4"),), (("rope_theta", "1000000.0", "1e6"),)]
    for _ in updates(rng, index, 40):
        fresh = LiveIndex(index.records())
        for settings in asked:
            assert evidence.knob_tier(index, settings) == evidence.knob_tier(fresh, settings)
        anchors = index.records()[:5]
        # (the table follows one index at a time: asked in turn, each is followed or built again)
        followed = evidence.siblings_of(index, anchors, set())
        assert followed == evidence.siblings_of(fresh, anchors, set())
        assert evidence._table_now.index() is fresh
        evidence.knob_tier(index, asked[0])  # back to the followed index: built again, then followed



def test_a_record_that_stops_naming_a_run_stops_being_its_sibling_without_a_rebuild():
    """The table keeps no record's prose words: a posting of a record filed again is checked against
    the record as it is now (and one of a record taken out is dropped)."""
    def rec(record_id: str, name: str, notes: str):
        return parse_record({"id": record_id, "name": name, "notes": notes})

    anchor = rec("x1", "rope-theta-1m", "rope_theta=1e6 at seq 4096")
    index = LiveIndex([anchor, rec("x2", "warmup-2k", "re-run of rope-theta-1m with a longer warmup"),
                       *(rec(f"f{i}", f"filler-{i}x", "an unrelated sweep of dropout rates") for i in range(5))])
    assert evidence.siblings_of(index, [anchor], set()) == [("x2", "sibling of x1")]
    table = evidence._table_now
    index.update(add=[rec("x2", "warmup-2k", "a longer warmup on its own")])
    assert evidence.siblings_of(index, [anchor], set()) == []
    index.update(add=[rec("x2", "warmup-2k", "again a re-run of rope-theta-1m")])
    assert evidence.siblings_of(index, [anchor], set()) == [("x2", "sibling of x1")]
    index.update(remove=["x2"])
    assert evidence.siblings_of(index, [anchor], set()) == []
    assert evidence._table_now is table  # followed, not built again

def test_background_work_waits_while_a_request_is_answered_and_never_for_itself(monkeypatch):
    monkeypatch.setattr(foreground, "QUIET", 0.05)
    monkeypatch.setattr(foreground, "MAX_WAIT", 60.0)
    inside, release, own = threading.Event(), threading.Event(), []

    def request() -> None:
        with foreground.answering():
            foreground.pause()  # a request's own work never waits (for MAX_WAIT: the request holds)
            own.append(release.is_set())
            inside.set()
            release.wait(60)

    thread = threading.Thread(target=request)
    thread.start()
    inside.wait(60)
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    foreground.pause()
    waited, released = time.monotonic() - started, release.is_set()
    thread.join()
    assert own == [False]
    assert released and waited >= 0.2 + 0.05 - 0.01  # until the request ended, and the quiet after it


def test_a_stream_of_requests_slows_background_work_down_without_stopping_it(monkeypatch):
    monkeypatch.setattr(foreground, "MAX_WAIT", 0.1)
    done = threading.Event()

    def requests() -> None:
        while not done.is_set():
            with foreground.answering():
                time.sleep(0.001)

    thread = threading.Thread(target=requests)
    thread.start()
    try:
        started = time.monotonic()
        foreground.pause()
        assert time.monotonic() - started >= 0.1 - 0.01  # it waited for the stream, up to MAX_WAIT, and returned
    finally:
        done.set()
        thread.join()


@pytest.fixture(autouse=True)
def one_table_at_a_time():
    yield
    evidence._table_now = None


def test_work_that_starts_more_elsewhere_keeps_background_work_waiting_a_little_longer(monkeypatch):
    monkeypatch.setattr(foreground, "QUIET", 0.0)
    with foreground.answering(linger=0.2):
        pass
    started = time.monotonic()
    foreground.pause()
    assert time.monotonic() - started >= 0.2 - 0.05


def test_background_work_steps_aside_from_a_requests_arrival_before_its_work_begins(monkeypatch):
    monkeypatch.setattr(foreground, "QUIET", 0.2)
    foreground.arrived()
    started = time.monotonic()
    foreground.pause()
    assert time.monotonic() - started >= 0.2 - 0.05


def test_idle_counts_from_the_last_request_and_is_nothing_while_one_is_answered():
    foreground.arrived()
    assert foreground.idle() < 0.05
    with foreground.answering():
        time.sleep(0.1)
        assert foreground.idle() == 0.0
    time.sleep(0.1)
    assert 0.1 - 0.05 <= foreground.idle() < 5.0
    with foreground.answering(linger=1.0):
        pass
    assert foreground.idle() == 0.0  # (what the request started elsewhere goes first too)


def test_a_big_pools_table_is_built_once_its_load_is_over_not_after_every_part(tmp_path, monkeypatch):
    """A first load commits a big `.jsonl` in parts; a table built after each was thrown away by the
    next (2× one build at 100k, docs/benchmarks.md § LSP first load): asked meanwhile, the tiers are
    absent and nothing is built; asked after the load, it is built (in the background) and answers."""
    monkeypatch.setattr(evidence, "BUILD_HERE", 2)
    monkeypatch.setattr(parts, "FIRST_PART_LINES", 4)
    (tmp_path / "runs.jsonl").write_text("".join(
        f'{{"id": "r{i}", "name": "lr-3e-4-1b", "status": "failed", "notes": "lr=3e-4 diverged"}}\n' for i in range(30)))
    pool = live_pool.LivePool([tmp_path], LiveIndex(), batch_records=4)
    settings = (("lr", "0.0003", "3e-4"),)
    asked_while_loading = []

    def ask(change) -> None:
        if pool.loading:
            asked_while_loading.append((len(pool.index), evidence.knob_tier(pool.index, settings), evidence._building))
    pool.subscribe(ask)
    pool.load()
    assert len(asked_while_loading) > 1 and asked_while_loading[0][0] < 30  # committed in parts
    assert all(tier == [] and building is None for _, tier, building in asked_while_loading)
    assert evidence.knob_tier(pool.index, settings) == []  # the load is over: built in the background now
    for thread in threading.enumerate():
        if thread.name == "soma-evidence":
            thread.join()
    assert len(evidence.knob_tier(pool.index, settings)) == 30


class Unwalkable(tuple):
    """A journal entry's ids that fail when read one by one (their number is known)."""

    def __iter__(self):
        raise AssertionError("the ids were walked")


def test_an_update_of_more_ids_than_asked_for_is_known_at_once_and_repeats_of_one_id_are_not_more():
    """`changed_since` gives up on an update holding more ids than `limit` without collecting them
    (a follower behind a load's part learned so only after a walk of its 10k+ ids); several updates of
    the same few ids stay followable however many they are."""
    rng = random.Random(5)
    index = LiveIndex([record(i, rng) for i in range(10)])
    start = index.version
    index.update(add=[record(i, rng) for i in range(10, 30)])
    assert len(index.changed_since(start, limit=20)) == 20
    at, ids = index._journal[-1]
    index._journal[-1] = (at, Unwalkable(ids))
    assert index.changed_since(start, limit=19) is None  # (its ids never read)
    index._journal[-1] = (at, ids)
    again = index.version
    for _ in range(30):
        index.update(add=[record(0, rng), record(1, rng)])
    assert index.changed_since(again, limit=2) == {"r0", "r1"}
