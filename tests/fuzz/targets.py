"""Fuzz targets (issue 23): each is a Hypothesis test body over hostile input, shared by the smoke run
in the test suite (tests/test_fuzz_smoke.py, a few dozen inputs each) and the long run of `make fuzz`
(tests/fuzz/run.py). What each asserts is in its docstring; docs/reliability.md has the figures.

`PER_INPUT_SECONDS` bounds one input's time (a hang is a failure) in the long run only: the test
suite sets no wall-clock limits.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from hypothesis import given, strategies as st

from soma_lsp.pool.loader import load_file
from soma_lsp.pool.problems import MAX_PER_FILE
from soma_lsp.query import BuiltQuery, _build_query, build_query
from soma_lsp.server.transport import MAX_HEADER, FrameReader

PER_INPUT_SECONDS: float | None = None  # set by run.py; None in the test suite
FRAME_LIMIT = 4096  # the reader's message limit under fuzzing: small, so that inputs reach it

# -- inputs -----------------------------------------------------------------------------------------

_WIRE_TOKENS = [b"Content-Length: ", b"content-length:", b"Content-Type: x", b"\r\n", b"\n", b"\r\n\r\n",
                b"0", b"1", b"17", b"-1", b"4097", b"99999999999", b"abc", b"{", b"}", b"[", b"]", b'"',
                b'"id": 3, ', b'{"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}', b"\\", b"\xff",
                b"\xc3", b" ", b"[" * 300, b"]" * 300, b"x" * 1000, b"\x00"]
_JSON_TOKENS = ['{', '}', '[', ']', '"id"', '"name"', '"status"', '"failed"', '"x"', ':', ',', ' ', '\n',
                '1', '-0.5e3', 'NaN', 'Infinity', 'null', 'true', '"\\ud800"', '"\\u0000"', '\ufeff', '"',
                '"metrics"', '"code"', '"architecture"', '[' * 200, ']' * 200, '1' * 400, '\x00', '"é😀"']
_YAML_TOKENS = ['---\n', '...\n', '- ', 'id: ', 'name: ', 'x', '\n', '  ', '&a ', '*a', '[', ']', '{', '}',
                ': ', ', ', '!!python/object:os.system ', '!!binary ', '"', "'", '#', '|\n', '>\n', '?',
                '[&b [*a, *a, *a, *a]]', '\t', '%YAML 1.2\n', '1', 'null', '~', '\ufeff']
_SOURCE_TOKENS = ['class ', 'def ', 'A', 'Attention', '(', ')', ':', '\n', '    ', 'self.x = nn.Linear(4, 4)',
                  '"""', '"', "'", '#', '@', 'fn ', 'struct ', '{', '}', ';', 'function ', '=>', 'import ',
                  'from ', '\t', '\r\n', '\r', '\x00', '\ud800', 'é', '😀', '\u202e', '\\', ' ' * 50, '.']


def _joined(tokens: list, kind) -> st.SearchStrategy:
    empty = b"" if kind is bytes else ""
    return st.lists(st.sampled_from(tokens), max_size=60).map(empty.join)


wire_bytes = st.one_of(st.binary(max_size=3000), _joined(_WIRE_TOKENS, bytes),
                       st.lists(st.one_of(st.binary(max_size=40), _joined(_WIRE_TOKENS, bytes)), max_size=8)
                       .map(b"".join))
cuts = st.lists(st.integers(min_value=1, max_value=700), max_size=30)
pool_formats = st.sampled_from(["json", "jsonl", "yaml"])


@st.composite
def pool_bytes(draw, fmt: str | None = None) -> tuple[str, bytes]:
    fmt = fmt or draw(pool_formats)
    tokens = _YAML_TOKENS if fmt == "yaml" else _JSON_TOKENS
    data = draw(st.one_of(st.binary(max_size=3000), _joined(tokens, str).map(lambda t: t.encode("utf-8", "surrogatepass")),
                          st.lists(st.one_of(_joined(tokens, str), st.text(max_size=30)), max_size=10)
                          .map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))))
    return fmt, data


sources = st.one_of(st.text(max_size=2000), _joined(_SOURCE_TOKENS, str))
source_paths = st.sampled_from(["m.py", "m.pyi", "a.rs", "a.go", "a.cpp", "a.cu", "a.ts", "a.tsx", "a.js", "a.jl",
                                "a.sh", "a.yaml", "a.json", "a.toml", "README", "x.unknown", "dir/.py", ""])
positions = st.one_of(st.none(), st.tuples(st.integers(-3, 120), st.integers(-3, 400)))
scopes = st.sampled_from(["hover", "lens", "find", "file"])

# -- the bound on one input -------------------------------------------------------------------------


class _Bounded:
    """Fail an input that takes longer than PER_INPUT_SECONDS (long run only)."""

    def __enter__(self) -> "_Bounded":
        self.start = time.perf_counter()
        return self

    def __exit__(self, kind, *_) -> None:
        elapsed = time.perf_counter() - self.start
        if kind is None and PER_INPUT_SECONDS is not None:
            assert elapsed <= PER_INPUT_SECONDS, f"one input took {elapsed:.2f} s (bound {PER_INPUT_SECONDS} s)"


# -- targets ------------------------------------------------------------------------------------------

def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


PROBE = {"jsonrpc": "2.0", "id": "probe", "method": "m", "params": {"x": [1, 2]}}


def frame_reader(data: bytes, cut_sizes: list[int]) -> None:
    """Arbitrary bytes in arbitrary chunks: `feed` never raises, the buffer never holds more than the
    message limit plus one chunk and a header, and valid frames sent after the garbage are read."""
    reader = FrameReader(max_message=FRAME_LIMIT)
    with _Bounded():
        position = 0
        for size in [*cut_sizes, len(data)]:
            chunk = data[position:position + size]
            position += size
            for kind, value in reader.feed(chunk):
                assert kind in ("message", "error", "refused")
                if kind != "message":
                    assert value[0] is None or isinstance(value[0], int | str)
            assert len(reader.buffer) <= FRAME_LIMIT + len(chunk) + MAX_HEADER
        after = reader.feed(b"\r\n\r\n" + _frame(PROBE) * 3)
        assert ("message", PROBE) in after, "valid frames after the garbage were not read"
        reader.feed(b"", eof=True)


@st.composite
def jsonl_with_a_record(draw) -> tuple[bytes, int]:
    _, data = draw(pool_bytes("jsonl"))
    lines = data.split(b"\n")
    at = draw(st.integers(0, len(lines)))
    return data, at


KEEP = {"id": "fuzz-keep", "name": "kept", "status": "failed", "notes": "a valid record among fuzzed lines"}


def _work_file(suffix: str) -> str:
    directory = os.environ.get("SOMA_FUZZ_DIR") or tempfile.gettempdir()
    return os.path.join(directory, f"soma-fuzz-{os.getpid()}.{suffix}")


def pool_file(sample: tuple[str, bytes]) -> None:
    """Arbitrary bytes as a .json, .jsonl or .yaml pool file: `load_file` never raises, keeps at most
    MAX_PER_FILE problems (+1 counting the rest), and every record it returns has an id and a name."""
    fmt, data = sample
    path = _work_file(fmt)
    with open(path, "wb") as f:
        f.write(data)
    with _Bounded():
        load = load_file(path)
    assert load.exists and len(load.problems) <= MAX_PER_FILE + 1
    assert all(record.id and record.name for record in load.records)


def valid_records_never_lost(sample: tuple[bytes, int], again: bytes) -> None:
    """A valid record line inserted at any line of a fuzzed .jsonl file is loaded — on a first read,
    and on a re-read of a changed file that reuses the previous load's unchanged lines."""
    data, at = sample
    lines = data.split(b"\n")
    lines.insert(at, json.dumps(KEEP).encode())
    path = _work_file("jsonl")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))
    with _Bounded():
        first = load_file(path)
    assert "fuzz-keep" in [r.id for r in first.records]
    lines.insert(at if at % 2 else len(lines), again.replace(b"\n", b" "))
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))
    with _Bounded():
        second = load_file(path, previous=first)
    assert "fuzz-keep" in [r.id for r in second.records]


def query_builder(source: str, path: str, position, scope: str) -> None:
    """Arbitrary source text, file names and positions: `build_query` never raises, and neither does
    the code behind its safety net (`_build_query`), so that net catches no bug."""
    with _Bounded():
        built = build_query(source, path, position=position, scope=scope)
        assert isinstance(built, BuiltQuery) and isinstance(built.text, str)
        _build_query(source, path, position, None, scope)


#: name → (target, the strategies of its arguments)
TARGETS = {
    "frame_reader": (frame_reader, (wire_bytes, cuts)),
    "pool_file": (pool_file, (pool_bytes(),)),
    "valid_records_never_lost": (valid_records_never_lost, (jsonl_with_a_record(), st.binary(max_size=200))),
    "query_builder": (query_builder, (sources, source_paths, positions, scopes)),
}


def hypothesis_test(name: str, settings):
    """The target as a Hypothesis test under `settings` (call it to run it)."""
    target, strategies = TARGETS[name]
    return settings(given(*strategies)(target))
