"""Bad input never loses valid records (docs/spec.md §1.4): one test per case of issue 3, on real files."""

from __future__ import annotations

import json
import math
import os
import tracemalloc
from pathlib import Path

import pytest

from soma_lsp.pool import MAX_JSON_BYTES, LivePool, Problem, load_file
from soma_lsp.pool.loader import STAMP, stamp_of
from soma_lsp.records import Status


def rec(i, **extra) -> dict:
    return {"id": f"exp-{i}", "name": f"run-{i}", **extra}


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def load_pool(root: Path) -> LivePool:
    pool = LivePool([root])
    pool.load()
    return pool


def ids(pool_or_load) -> list[str]:
    if isinstance(pool_or_load, LivePool):
        return sorted(r.id for r in pool_or_load.records())
    return [r.id for r in pool_or_load.records]


def reports(pool: LivePool) -> list[str]:
    return [str(p) for problems in pool.problems.values() for p in problems]


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    root = tmp_path / "pool"
    write(root / "good.json", json.dumps(rec(1)))
    write(root / "zz-good.jsonl", jsonl(rec(2), rec(3)))
    return root


GOOD = ["exp-1", "exp-2", "exp-3"]


# -- the valid formats and their lines ----------------------------------------------------------

def test_every_format_and_every_record_line(tmp_path):
    root = tmp_path / "pool"
    write(root / "one.json", "\n\n  " + json.dumps(rec(1)))
    write(root / "array.json", '[\n  {"id": "exp-2", "name": "a"},\n\n  {"id": "exp-3",\n   "name": "b"}\n]\n')
    write(root / "lines.jsonl", jsonl(rec(4)) + "\n\n" + jsonl(rec(5)))
    write(root / "one.yaml", "# comment\nid: exp-6\nname: six\n")
    write(root / "list.yml", "- id: exp-7\n  name: seven\n-   id: exp-8\n    name: eight\n")
    write(root / "stream.yaml", "id: exp-9\nname: nine\n---\nid: exp-10\nname: ten\n---\n- id: exp-11\n  name: e\n")
    write(root / "notes.md", "# not a record file")
    write(root / ".hidden" / "skip.json", json.dumps(rec(99)))
    write(root / "sub" / ".swap.json", json.dumps(rec(98)))
    write(root / "sub" / "deep" / "deeper.json", json.dumps(rec(12)))
    pool = load_pool(root)
    lines = {r.id: (Path(r.source.path).name, r.source.line) for r in pool.records()}
    assert lines == {
        "exp-1": ("one.json", 2), "exp-2": ("array.json", 1), "exp-3": ("array.json", 3),
        "exp-4": ("lines.jsonl", 0), "exp-5": ("lines.jsonl", 3), "exp-6": ("one.yaml", 1),
        "exp-7": ("list.yml", 0), "exp-8": ("list.yml", 2), "exp-9": ("stream.yaml", 0),
        "exp-10": ("stream.yaml", 3), "exp-11": ("stream.yaml", 6), "exp-12": ("deeper.json", 0)}
    assert pool.problems == {}
    assert len(pool.files) == 7


def test_problem_prints_path_line_field_problem():
    problem = Problem("/p/a.jsonl", 4, "metrics[0].value", "expected a number", "error", "validation")
    assert str(problem) == "/p/a.jsonl:5: metrics[0].value: expected a number"
    assert str(Problem("/p/a.json", 0, "", "invalid JSON: x", "error", "json")) == "/p/a.json:1: invalid JSON: x"


# -- one test per bad input -------------------------------------------------------------------

def test_invalid_json(pool_dir):
    write(pool_dir / "bad.json", '{"id": "exp-9", "name": "x",\n "notes": oops}\n')
    write(pool_dir / "mixed.jsonl", jsonl(rec(4)) + '{"id": "exp-5", name}\n' + jsonl(rec(6)))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-6"])
    bad, mixed = pool.problems_for(str(pool_dir / "bad.json")), pool.problems_for(str(pool_dir / "mixed.jsonl"))
    assert [(p.line, p.kind) for p in bad] == [(1, "json")]
    assert str(bad[0]).startswith(f"{pool_dir / 'bad.json'}:2: invalid JSON: Expecting value")
    assert [(p.line, p.kind) for p in mixed] == [(1, "json")]


def test_invalid_yaml(pool_dir):
    write(pool_dir / "bad.yaml", "id: exp-7\nname: seven\n---\nid: exp-8\nname: [unclosed\n")
    write(pool_dir / "tabs.yml", "id: exp-9\n\tname: x\n")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-7"])  # the document before the error still loads
    (bad,) = pool.problems_for(str(pool_dir / "bad.yaml"))
    assert bad.kind == "yaml" and bad.severity == "error" and "invalid YAML" in str(bad)
    assert bad.line >= 4
    (tabs,) = pool.problems_for(str(pool_dir / "tabs.yml"))
    assert tabs.kind == "yaml" and tabs.line == 1


def test_truncated_file(pool_dir):
    whole = json.dumps([rec(4), rec(5), rec(6)], indent=1)
    write(pool_dir / "array.json", whole[: whole.index('"exp-6"') + 3])
    write(pool_dir / "object.json", json.dumps(rec(7))[:-5])
    write(pool_dir / "lines.jsonl", jsonl(rec(8)) + json.dumps(rec(9))[:-3])
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-5", "exp-8"])
    for name in ("array.json", "object.json", "lines.jsonl"):
        (problem,) = pool.problems_for(str(pool_dir / name))
        assert problem.kind == "json" and "invalid JSON" in problem.message, problem
    assert pool.problems_for(str(pool_dir / "lines.jsonl"))[0].line == 1


def test_invalid_utf8_and_bom(pool_dir):
    bad = json.dumps(rec(4, notes="caf\u00e9"), ensure_ascii=False).encode().replace(b"\xc3\xa9", b"\xe9")
    write(pool_dir / "latin1.json", bad)
    write(pool_dir / "latin1.yaml", b"id: exp-5\nname: caf\xe9\n")
    write(pool_dir / "lines.jsonl", jsonl(rec(6)).encode() + bad + b"\n" + jsonl(rec(7)).encode())
    write(pool_dir / "bom.json", b"\xef\xbb\xbf" + json.dumps(rec(8)).encode())
    write(pool_dir / "bom.jsonl", b"\xef\xbb\xbf" + jsonl(rec(9), rec(10)).encode())
    write(pool_dir / "bom.yaml", b"\xef\xbb\xbfid: exp-11\nname: eleven\n")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-6", "exp-7", "exp-8", "exp-9", "exp-10", "exp-11"])
    for name, line in (("latin1.json", 0), ("latin1.yaml", 1), ("lines.jsonl", 1)):
        (problem,) = pool.problems_for(str(pool_dir / name))
        assert (problem.kind, problem.line) == ("utf-8", line)
        assert "invalid UTF-8 (byte 0xe9" in str(problem)


def test_wrong_types(pool_dir):
    write(pool_dir / "types.jsonl", jsonl(rec(4, name=3), rec(5, tags="x"), rec(6), rec(7, metrics=[{"name": "loss", "value": {}}]),
                                          rec(8, created_at=12), [rec(9)], "just a string"))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-6"])
    assert [(p.line, p.field, p.message) for p in pool.problems_for(str(pool_dir / "types.jsonl"))] == [
        (0, "name", "expected a non-empty string, got a number"),
        (1, "tags", "expected a list of strings, got a string"),
        (3, "metrics[0].value", "expected a number, got an object"),
        (4, "created_at", "expected an RFC 3339 timestamp string, got a number"),
        (5, "", "expected one record (an object) per line, got a list"),
        (6, "", "expected one record (an object) per line, got a string")]
    write(pool_dir / "scalar.json", "42")
    pool = load_pool(pool_dir)
    assert [p.message for p in pool.problems_for(str(pool_dir / "scalar.json"))] == [
        "expected a record (an object) or an array of records, got a number"]


def test_missing_id_or_name(pool_dir):
    write(pool_dir / "missing.json", json.dumps([{"name": "no id"}, rec(4), {"id": "exp-5"}, {"id": None, "name": "x"}]))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4"])
    assert [str(p).split(":", 1)[1] for p in pool.problems_for(str(pool_dir / "missing.json"))] == [
        "1: id: is required", "1: name: is required", "1:73: id: is required"]  # the last at its key


def test_empty_strings(pool_dir):
    write(pool_dir / "empty.yaml", "- id: ''\n  name: x\n- id: exp-4\n  name: '   '\n- id: exp-5\n  name: five\n  notes: ''\n")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-5"])
    assert pool.get("exp-5").notes is None  # an empty optional text means absent
    assert [(p.line, p.field, p.message) for p in pool.problems_for(str(pool_dir / "empty.yaml"))] == [
        (0, "id", "must not be empty"), (3, "name", "must not be empty")]  # each on its key's line


def test_unknown_status_loads_as_unknown_with_warning(pool_dir):
    write(pool_dir / "status.json", json.dumps([rec(4, status="exploded"), rec(5, status="FINISHED")]))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-5"])
    assert pool.get("exp-4").status is Status.UNKNOWN and pool.get("exp-5").status is Status.SUCCEEDED
    (warning,) = pool.problems_for(str(pool_dir / "status.json"))
    assert (warning.severity, warning.kind, warning.field) == ("warning", "status", "status")
    assert str(warning).endswith("status.json:1: status: unknown status 'exploded', loaded as 'unknown'")
    assert pool.summary()["errors"] == 0 and pool.summary()["warnings"] == 1


def test_nan_and_infinite_metrics_accepted(pool_dir):
    write(pool_dir / "literals.json", '{"id": "exp-4", "name": "n", "metrics": {"loss": NaN, "gn": Infinity, "x": -Infinity}}')
    write(pool_dir / "strings.jsonl", jsonl(rec(5, metrics=[{"name": "loss", "value": "NaN", "baseline": 2.0, "goal": "min"}]),
                                            rec(6, metrics={"loss": {"value": "-inf"}})))
    write(pool_dir / "lit.jsonl", '{"id": "exp-7", "name": "n", "metrics": {"loss": NaN}}\n')
    write(pool_dir / "yaml.yaml", "id: exp-8\nname: n\nmetrics:\n  loss: .nan\n  gn: {value: .inf}\n  lo: -.inf\n")
    pool = load_pool(pool_dir)
    assert pool.problems == {}
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-5", "exp-6", "exp-7", "exp-8"])
    values = {r.id: [m.value for m in r.metrics] for r in pool.records() if r.metrics}
    assert math.isnan(values["exp-4"][0]) and values["exp-4"][1:] == [math.inf, -math.inf]
    assert math.isnan(values["exp-5"][0]) and values["exp-6"] == [-math.inf]
    assert math.isnan(values["exp-7"][0]) and math.isnan(values["exp-8"][0]) and values["exp-8"][1:] == [math.inf, -math.inf]


def test_non_numeric_metric_value(pool_dir):
    write(pool_dir / "metric.json", json.dumps([rec(4, metrics={"loss": "fast"}), rec(5, metrics={"loss": 1.5}),
                                                rec(6, metrics=[{"name": "acc", "value": True}])]))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-5"])
    assert [(p.field, p.message) for p in pool.problems_for(str(pool_dir / "metric.json"))] == [
        ("metrics.loss", "expected a number, got the string 'fast'"), ("metrics[0].value", "expected a number, got a boolean")]


def test_duplicate_ids_first_in_path_order_wins(pool_dir):
    write(pool_dir / "a" / "first.json", json.dumps(rec(7, name="winner")))
    write(pool_dir / "b" / "second.jsonl", jsonl(rec(8), rec(7, name="loser")))
    write(pool_dir / "a" / "same-file.json", json.dumps([rec(9, name="early"), rec(9, name="late")]))
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-7", "exp-8", "exp-9"])
    assert pool.get("exp-7").name == "winner" and pool.get("exp-9").name == "early"
    (dup,) = pool.problems_for(str(pool_dir / "b" / "second.jsonl"))
    assert (dup.kind, dup.line, dup.field) == ("duplicate", 1, "id")
    assert str(dup).endswith("second.jsonl:2: id: duplicate id 'exp-7', already defined at a/first.json:1; this record is ignored")
    (same,) = pool.problems_for(str(pool_dir / "a" / "same-file.json"))
    assert same.kind == "duplicate" and same.line == 0 and "a/same-file.json:1" in same.message


def test_json_nested_thousands_deep(pool_dir):
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    write(pool_dir / "deep.json", deep)
    write(pool_dir / "deep-array.json", "[" * 5000 + "]" * 5000)
    write(pool_dir / "deep-in-record.json", json.dumps([rec(4)])[:-1] + ', {"id": "exp-5", "name": "x", "extra": ' + "[" * 5000 + "]" * 5000 + "}]")
    write(pool_dir / "deep.jsonl", jsonl(rec(6)) + deep + "\n" + jsonl(rec(7)))
    write(pool_dir / "deep.yaml", "id: exp-8\nname: x\nextra: " + "[" * 5000 + "]" * 5000 + "\n")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-6", "exp-7"])
    for name in ("deep.json", "deep-array.json", "deep-in-record.json", "deep.jsonl"):
        (problem,) = pool.problems_for(str(pool_dir / name))
        assert problem.kind == "too-deep" and "nested too deeply" in problem.message, (name, problem)
    assert pool.problems_for(str(pool_dir / "deep.jsonl"))[0].line == 1
    (yaml_problem,) = pool.problems_for(str(pool_dir / "deep.yaml"))
    assert yaml_problem.kind == "too-deep" and "nested too deeply" in yaml_problem.message


def test_yaml_alias_bomb(pool_dir):
    bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for name, prev in zip("bcdefghi", "abcdefgh"):
        bomb.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    write(pool_dir / "bomb.yaml", "id: exp-4\nname: x\n---\n" + "\n".join(bomb) + "\n")
    write(pool_dir / "recursive.yaml", "id: exp-5\nname: x\nloop: &l [*l]\n")
    write(pool_dir / "anchors.yaml", "- &base {id: exp-6, name: six, tags: [a]}\n- {<<: *base, id: exp-7}\n")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-6", "exp-7"])
    (bomb_problem,) = pool.problems_for(str(pool_dir / "bomb.yaml"))
    assert (bomb_problem.kind, bomb_problem.line) == ("alias-bomb", 3) and "alias bomb" in bomb_problem.message
    (loop,) = pool.problems_for(str(pool_dir / "recursive.yaml"))
    assert loop.kind == "alias-bomb" and "recursive" in loop.message


def test_100_mb_single_json_file_is_refused_with_bounded_memory(pool_dir):
    big = pool_dir / "huge.json"
    one = json.dumps(rec(0, notes="x" * 900))
    count = 100 * (1 << 20) // (len(one) + 2) + 1
    with big.open("w") as f:
        f.write("[")
        f.write(",\n".join(json.dumps(rec(1000 + i, notes="x" * 900)) for i in range(count)))
        f.write("]")
    assert big.stat().st_size > 100 * (1 << 20) > MAX_JSON_BYTES
    tracemalloc.start()
    try:
        pool = load_pool(pool_dir)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * (1 << 20)  # the file is refused before it is read
    assert ids(pool) == GOOD
    (problem,) = pool.problems_for(str(big))
    assert problem.kind == "too-large" and problem.severity == "error"
    assert "MiB, over the 64 MiB limit" in str(problem) and ".jsonl" in str(problem)
    # The same content as JSONL streams line by line: no limit on the file, only on one line.
    lines = pool_dir / "huge.jsonl"
    with lines.open("w") as f:
        for i in range(2000):
            f.write(json.dumps(rec(5000 + i)) + "\n")
    loaded = load_file(lines, max_json_bytes=1024)
    assert len(loaded.records) == 2000 and loaded.problems == []


def test_symlink_loop(pool_dir, tmp_path):
    (pool_dir / "sub").mkdir()
    write(pool_dir / "sub" / "inner.json", json.dumps(rec(4)))
    os.symlink(pool_dir, pool_dir / "sub" / "loop")  # a directory loop
    os.symlink(pool_dir / "b.json", pool_dir / "a.json")  # a file loop: a -> b -> a
    os.symlink(pool_dir / "a.json", pool_dir / "b.json")
    write(tmp_path / "outside" / "secret.json", json.dumps(rec(666)))
    os.symlink(tmp_path / "outside" / "secret.json", pool_dir / "escape.json")
    os.symlink(tmp_path / "outside", pool_dir / "escape-dir")
    pool = load_pool(pool_dir)
    assert ids(pool) == sorted(GOOD + ["exp-4"])
    by_name = {Path(path).name: problems for path, problems in pool.problems.items()}
    assert [p.kind for p in by_name["loop"]] == ["symlink"] and "loop" in by_name["loop"][0].message
    assert all(p.kind == "symlink" and "loop" in p.message for n in ("a.json", "b.json") for p in by_name[n])
    assert "outside the pool roots" in by_name["escape.json"][0].message
    assert "outside the pool roots" in by_name["escape-dir"][0].message
    assert load_file(pool_dir / "a.json").problems[0].kind == "symlink"


def _load_as(root: Path, uid: int | None) -> dict:
    """Load the pool, as an unprivileged user when `uid` is given (root reads any file): in a forked
    child that drops its privileges and sends back what it saw."""
    def look() -> dict:
        pool = load_pool(root)
        return {"ids": ids(pool), "problems": [[p.kind, str(p)] for ps in pool.problems.values() for p in ps]}
    if uid is None:
        return look()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_end)
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, json.dumps(look()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        out = pipe.read()
    os.waitpid(child, 0)
    return json.loads(out)


def test_unreadable_file():
    import shutil
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="soma-unreadable-"))
    try:
        write(root / "good.json", json.dumps(rec(1)))
        write(root / "locked.json", json.dumps(rec(2)))
        write(root / "dir.json" / "x.txt", "")  # a directory with a record file's name: not a file, skipped
        for path in [root, *root.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(root / "locked.json", 0o000)
        result = _load_as(root, 65534 if os.geteuid() == 0 else None)
        assert result["ids"] == ["exp-1"]
        assert result["problems"] == [["unreadable", f"{root / 'locked.json'}:1: permission denied; not loaded"]]
        (problem,) = load_file(root / "dir.json").problems
        assert problem.kind == "unreadable" and "directory" in problem.message
    finally:
        shutil.rmtree(root)


def test_file_deleted_between_listing_and_reading(pool_dir):
    write(pool_dir / "m-doomed.json", json.dumps(rec(9)))
    doomed = pool_dir / "m-doomed.json"
    pool = LivePool([pool_dir])

    def progress(done, total):  # called after each file: good.json is read, m-doomed.json is next
        if done and doomed.exists():
            doomed.unlink()

    pool.load(progress=progress)
    assert not doomed.exists()
    assert ids(pool) == GOOD
    (problem,) = pool.problems_for(str(doomed))
    assert (problem.kind, problem.severity) == ("vanished", "warning")
    assert str(problem) == f"{doomed}:1: file vanished before it could be read (deleted or renamed)"
    assert str(doomed) not in pool.files
    assert load_file(doomed).problems[0].kind == "vanished"
    pool.apply([doomed])  # the delete event that follows clears it
    assert pool.problems == {}


def test_file_being_written_later_version_wins(pool_dir):
    path = pool_dir / "live.json"
    full = json.dumps([rec(4), rec(5, notes="finished")], indent=2)
    pool = load_pool(pool_dir)
    with path.open("w") as f:  # partial content, still open for writing
        f.write(full[: len(full) // 2 + 10])
        f.flush()
        pool.apply([path])
        partial = pool.problems_for(str(path))
        assert [p.kind for p in partial] == ["json"]
        assert "exp-4" in pool.get("exp-4").id  # what was complete already loads
        f.seek(0)
        f.write(full)
        f.truncate()
    pool.apply([path])
    assert pool.problems_for(str(path)) == []
    assert ids(pool) == sorted(GOOD + ["exp-4", "exp-5"]) and pool.get("exp-5").notes == "finished"


def test_a_yaml_integer_beyond_a_float_is_reported_with_its_field_and_the_rest_loads(tmp_path):
    path = tmp_path / "runs.yaml"
    path.write_text("id: a\nname: big\nmetrics: {loss: 1" + "0" * 400 + "}\n---\nid: b\nname: fine\n")
    load = load_file(path)
    assert [r.id for r in load.records] == ["b"]
    (problem,) = load.problems
    assert (problem.line, problem.column, problem.field, problem.kind) == (2, 0, "metrics.loss", "validation")
    assert "too large" in problem.message


def test_loads_without_problems_share_one_list_that_refuses_to_grow(tmp_path):
    from soma_lsp.pool.problems import NO_PROBLEMS
    a, b = (load_file(write(tmp_path / f"{i}.json", json.dumps(rec(i)))) for i in (1, 2))
    assert a.problems is b.problems is NO_PROBLEMS and a.problems == []
    for grow in (lambda p: p.append(1), lambda p: p.extend([1]), lambda p: p.insert(0, 1),
                 lambda p: p.__setitem__(slice(0, 0), [1]), lambda p: p.__iadd__([1])):
        with pytest.raises(TypeError):
            grow(NO_PROBLEMS)
    assert NO_PROBLEMS == [] and load_file(write(tmp_path / "bad.json", "{")).problems != []


def test_a_stamp_takes_an_inode_or_device_beyond_64_bits_or_below_zero(tmp_path):
    """Windows' ReFS has 128-bit file ids and macOS a signed `dev_t`: the stamp keeps their low 64 bits
    rather than refusing the file."""
    path = tmp_path / "r.json"
    path.write_text("{}")
    real = os.stat(path)
    fields = list(real)
    fields[1], fields[2] = (1 << 100) + real.st_ino, -5  # st_ino, st_dev
    odd = os.stat_result(fields, {"st_mtime_ns": real.st_mtime_ns, "st_ctime_ns": real.st_ctime_ns})
    stamp = stamp_of(odd)
    assert STAMP.unpack(stamp)[3:] == (real.st_ino, (1 << 64) - 5)
    assert stamp_of(real) != stamp
