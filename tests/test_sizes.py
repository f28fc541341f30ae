"""One reading of a byte count for every message that shows one (docs/spec.md §4.8, `soma-lsp cache`)."""

from soma_lsp.sizes import size_text


def test_sizes_count_in_1024s_and_say_so():
    assert size_text(0) == "0 B"
    assert size_text(1023) == "1023 B"
    assert size_text(1536) == "1.5 KiB"
    assert size_text(5 * 2**20) == "5.0 MiB"
    assert size_text(3 * 2**40) == "3072.0 GiB"  # past the largest unit: still in it
