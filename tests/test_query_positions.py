"""UTF-16 positions (LSP) ↔ code points ↔ tree-sitter bytes."""

import pytest
from hypothesis import given, strategies as st

from soma_lsp.query import LineIndex, split_lines, utf16_len, utf16_to_index
from soma_lsp.query.positions import index_to_utf16


def test_utf16_lengths():
    assert utf16_len("abc") == 3
    assert utf16_len("é") == 1
    assert utf16_len("😀") == 2
    assert utf16_len("a😀b") == 4


def test_utf16_to_index_and_back():
    line = "x = '😀é' + y"
    # 'y' is code point 11, UTF-16 column 12 (the emoji takes two units)
    assert line[11] == "y"
    assert utf16_to_index(line, 12) == 11
    assert index_to_utf16(line, 11) == 12
    assert utf16_to_index(line, 6) == 5  # inside the surrogate pair: rounds down to the emoji
    assert utf16_to_index(line, 999) == len(line)
    assert utf16_to_index(line, -3) == 0


def test_line_index_positions():
    src = "ab\n😀cd\n\nlast"
    idx = LineIndex(src)
    assert idx.offset((1, 2)) == src.index("c")
    assert idx.position(src.index("d")) == (1, 3)
    assert idx.offset((2, 5)) == src.index("\n\n") + 1  # clamped to the (empty) line
    assert idx.offset((99, 0)) == len(src)
    assert idx.position(10_000) == (3, 4)
    assert idx.offset((3, 1)) == src.index("ast")
    assert idx.position(src.index("ast")) == (3, 1)


@pytest.mark.parametrize("src", ["é = 1\nñ😀 = 2\n", "é = 1\r\nñ😀 = 2\r\rx\r\n"])
def test_byte_offsets_map_to_code_points(src):
    idx = LineIndex(src)
    b = src.encode("utf-8")
    for i in range(len(src) + 1):
        assert idx.byte_offset(len(src[:i].encode("utf-8"))) == i
    assert idx.byte_offset(len(b)) == len(src)


def test_lines_are_lsp_lines():
    """CR LF, CR and LF end a line — and nothing else (a form feed or U+2028 is text)."""
    src = "a\r\nb\rc\nd\x0ce\u2028f"
    assert split_lines(src) == ["a", "b", "c", "d\x0ce\u2028f"]
    idx = LineIndex(src)
    assert idx.lines == split_lines(src)
    assert idx.offset((1, 0)) == src.index("b") and idx.offset((2, 0)) == src.index("c")
    assert idx.offset((0, 5)) == src.index("\r")  # clamped to the end of the line, before its break
    assert idx.position(src.index("\n")) == (0, 1)  # inside a CR LF: the end of its line
    assert idx.position(src.index("d")) == (3, 0)


@given(st.text(), st.integers(-3, 50), st.integers(-3, 80))
def test_position_round_trip(src, line, character):
    idx = LineIndex(src)
    off = idx.offset((line, character))
    assert 0 <= off <= len(src)
    assert idx.offset(idx.position(off)) == off
