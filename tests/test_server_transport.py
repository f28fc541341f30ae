"""Framing: the server's reader survives what pygls' own reader does not."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from soma_lsp.server.transport import FrameReader, request_id_in


def frame(message: dict, *, length_delta: int = 0, eol: bytes = b"\r\n") -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d" % (len(body) + length_delta) + eol + eol + body


MESSAGES = [{"jsonrpc": "2.0", "id": i, "method": "m", "params": {"text": "é ü 😀" * i}} for i in range(5)]


def messages(items):
    return [value for kind, value in items if kind == "message"]


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=50))
def test_any_chunking_gives_the_same_messages(cuts):
    data = b"".join(frame(m) for m in MESSAGES)
    reader, out, position = FrameReader(), [], 0
    for cut in cuts:
        out += reader.feed(data[position:position + cut])
        position += cut
    out += reader.feed(data[position:])
    assert messages(out) == MESSAGES


def test_lf_headers_other_headers_and_case():
    body = json.dumps(MESSAGES[1]).encode()
    data = frame(MESSAGES[0], eol=b"\n") + b"Content-Type: x\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    assert messages(FrameReader().feed(data)) == MESSAGES[:2]


def test_wrong_lengths_and_garbage_resynchronise():
    data = (frame(MESSAGES[0], length_delta=40) + frame(MESSAGES[1], length_delta=-7)
            + b"junk line\r\n" + frame(MESSAGES[2]) + frame(MESSAGES[3]))
    assert messages(FrameReader().feed(data)) == MESSAGES[:4]


def test_too_long_length_with_nothing_after_still_delivers():
    reader = FrameReader()
    assert messages(reader.feed(frame(MESSAGES[1], length_delta=100))) == [MESSAGES[1]]


def test_bad_json_is_reported_with_its_id():
    body = b'{"jsonrpc": "2.0", "id": 17, "method": "x", "params": {nope'
    out = FrameReader().feed(b"Content-Length: %d\r\n\r\n" % len(body) + body + frame(MESSAGES[0]))
    assert out[0][0] == "error" and out[0][1][0] == 17
    assert messages(out) == [MESSAGES[0]]


def test_request_id_in():
    assert request_id_in(b'{"jsonrpc":"2.0","id":"abc","method') == "abc"
    assert request_id_in(b'{"id": 3, "x": {"id": 4}') == 3
    assert request_id_in(b"nothing here") is None


def test_nesting_at_the_limit_is_decoded_and_one_more_level_is_an_error_with_the_id():
    from soma_lsp.server.transport import MAX_DEPTH

    def message(depth):  # the object around "params" is one level
        return {"jsonrpc": "2.0", "id": depth, "method": "m", "params": json.loads("[" * (depth - 1) + "]" * (depth - 1))}

    out = FrameReader().feed(frame(message(MAX_DEPTH)) + frame(message(MAX_DEPTH + 1)))
    assert out[0] == ("message", message(MAX_DEPTH))
    assert out[1] == ("refused", (MAX_DEPTH + 1, f"Invalid Request: message nested deeper than {MAX_DEPTH} levels"))


def test_a_message_at_the_size_limit_is_read_and_one_byte_more_is_dropped_with_its_id():
    body = json.dumps(MESSAGES[1]).encode()
    reader = FrameReader(max_message=len(body))
    assert messages(reader.feed(frame(MESSAGES[1]))) == [MESSAGES[1]]
    over = b'{"id": 5, ' + b"z" * len(body)
    out = reader.feed(b"Content-Length: %d\r\n\r\n" % len(over) + over)
    assert out == [("refused", (5, f"Invalid Request: message over the {len(body)}-byte limit (Content-Length {len(over)})"))]
    assert messages(reader.feed(b"z" * 5000 + frame(MESSAGES[0]))) == [MESSAGES[0]]  # the rest is skipped


def test_a_huge_content_length_never_buffers_past_the_limit():
    reader, limit, largest = FrameReader(max_message=1 << 20), 1 << 20, 0
    reader.feed(b"Content-Length: 99999999999\r\n\r\n")
    for _ in range(100):  # 6.4 MB of a body that is not JSON, in the transport's reads of 64 KiB
        reader.feed(b"q" * 65536)
        largest = max(largest, len(reader.buffer))
    assert largest <= limit + 65536
    assert messages(reader.feed(frame(MESSAGES[3]))) == [MESSAGES[3]]


def test_a_bad_content_length_is_an_error_and_the_next_frame_is_read():
    for bad in (b"-1", b"abc", b"", b"1e3", b"12 34"):
        out = FrameReader().feed(b"Content-Length: " + bad + b"\r\n\r\n{}" + frame(MESSAGES[0]))
        assert out[0][0] == "error" and out[0][1][0] is None
        assert messages(out) == [MESSAGES[0]]


def test_a_too_deep_body_under_a_too_large_length_is_answered_when_the_next_frame_comes():
    from soma_lsp.server.transport import MAX_DEPTH

    body = b'{"id": 9, "params": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    out = FrameReader().feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 1000) + body + frame(MESSAGES[0]))
    assert out == [("refused", (9, f"Invalid Request: message nested deeper than {MAX_DEPTH} levels")),
                   ("message", MESSAGES[0])]
