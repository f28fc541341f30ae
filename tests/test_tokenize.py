from collections import Counter
from unittest import mock

import pytest
from hypothesis import given, strategies as st

from soma_lsp.retrieval import documents as documents_module, short_runs, tokenize
from soma_lsp.retrieval.documents import DocumentCounter
from soma_lsp.retrieval.short_runs import ShortRunTable
from soma_lsp.retrieval.tokenize import document_terms
from spec_reference import tokenize as reference_tokenize

SPEC_TABLE = [
    ("LayerNormFP32", ["layer", "norm", "fp32", "layernormfp32"]),
    ("torch.nn.functional", ["torch", "nn", "functional"]),
    ("lr_warmup-steps", ["lr", "warmup", "steps"]),
    ("HTTPServer", ["http", "server", "httpserver"]),
    ("ResNet50", ["res", "net50", "resnet50"]),
    ("Conv2D", ["conv2d"]),
    ("RoPE", ["ro", "pe", "rope"]),
    ("ALiBi", ["a", "li", "bi", "alibi"]),
    ("__init__", ["init"]),
    ("3e-4", ["3e", "4"]),
]


@pytest.mark.parametrize("text, terms", SPEC_TABLE)
def test_spec_table(text, terms):
    assert Counter(tokenize(text)) == Counter(terms)


def test_runs_are_unicode_letters_and_digits():
    assert tokenize("Größe der Schicht: 12 · Überlauf") == ["größe", "der", "schicht", "12", "überlauf"]
    assert tokenize("注意力机制 attention") == ["注意力机制", "attention"]


def test_no_stemming_no_stop_words():
    assert tokenize("the runs were diverging") == ["the", "runs", "were", "diverging"]


def test_repeats_are_kept():
    assert tokenize("rope RoPE") == ["rope", "ro", "pe", "rope"]


@given(st.text())
def test_matches_the_spec_reading_on_any_text(text):
    assert Counter(tokenize(text)) == Counter(reference_tokenize(text))


@given(st.text(alphabet=st.characters(categories=["Lu", "Ll", "Nd", "Pc", "Pd", "Zs", "Po"])))
def test_terms_are_lower_cased_pieces_of_the_text(text):
    lowered = text.lower()
    for term in tokenize(text):
        assert term and term == term.lower() and term in lowered


@given(st.text())
def test_document_terms_are_the_same_bag(text):
    assert Counter(document_terms(text)) == Counter(tokenize(text))


@given(st.text(alphabet="aAbBzZ09_- .xX"))
def test_document_terms_on_ascii_case_mixes(text):
    assert Counter(document_terms(text)) == Counter(reference_tokenize(text))


field_text = st.one_of(st.text(), st.text(alphabet="aAbBzZ09_- .xX\x01é"), st.sampled_from(
    ["LayerNormFP32 torch.nn", "HTTPServer", "RoPE ALiBi", "Größe ÉcoleNormale", "a\x01b", ""]))


@given(st.lists(st.lists(st.tuples(field_text, field_text, field_text, field_text), max_size=6), max_size=3),
       st.sampled_from([1, 2, 256]), st.sampled_from([0, short_runs.TABLE_BYTES]))
def test_batch_document_counts_are_the_weighted_bag(batches, chunk, table_bytes):
    """DocumentCounter (chunks of documents in C and numpy) gives each document exactly docs/spec.md §2.2's bag:
    tokenize(name) ×3 + tokenize(headline) ×2 + tokenize(notes) + tokenize(details), batch after batch,
    as CSR postings whose rows ascend per term — its runs' ids looked up one by one or (`table_bytes` 0)
    all through the `ShortRunTable`."""
    vocabulary: dict[str, int] = {}
    counter = DocumentCounter(vocabulary)
    with mock.patch.object(documents_module, "CHUNK_DOCUMENTS", chunk), \
            mock.patch.object(short_runs, "TABLE_BYTES", table_bytes):  # several chunks per batch too
        for documents in batches:
            _check_counts(counter, vocabulary, documents)


def _check_counts(counter, vocabulary, documents):
    indptr, rows, counts = counter.count(documents)
    assert indptr.size == len(vocabulary) + 1 and indptr[0] == 0 and indptr[-1] == rows.size
    term = {key: t for t, key in vocabulary.items()}
    got = [Counter() for _ in documents]
    for key in range(len(vocabulary)):
        posted = rows[indptr[key]:indptr[key + 1]].tolist()
        assert posted == sorted(set(posted))  # ascending, one entry per document
        for row, tf in zip(posted, counts[indptr[key]:indptr[key + 1]].tolist()):
            got[row][term[key]] = tf
    want = [Counter(tokenize(n) * 3 + tokenize(h) * 2 + tokenize(o) + tokenize(d)) for n, h, o, d in documents]
    assert got == want


run_text = st.lists(st.one_of(st.text(alphabet="ab", min_size=1, max_size=20),  # short and long runs, repeated
                              st.text(alphabet="aZ09\x01", min_size=1, max_size=40),
                              st.binary(min_size=1, max_size=24).map(lambda b: bytes(c % 94 + 33 for c in b).decode()),
                              st.sampled_from(["x" * n + tail for n in (7, 8, 15, 16, 17) for tail in ("", "y")])),
                    max_size=60).map(" ".join)


class _Ids(dict):
    """Run → id, a new run getting the next id (as `documents._RunIds` does)."""

    def __missing__(self, run):
        self[run] = len(self)
        return self[run]


@given(st.lists(run_text, max_size=8))
def test_short_run_table_gives_the_ids_of_looking_up_each_run(texts):
    """Text after text, the table's ids are those of looking every run up in order — new runs numbered
    in the same order — whether a run fits its two integers (≤ 16 bytes) or not, and as it grows."""
    table, by_table, one_by_one = ShortRunTable(), _Ids(), _Ids()
    with mock.patch.object(short_runs, "TABLE_BYTES", 0):
        for text in [*texts, " ".join(f"r{i}" for i in range(3000))]:  # (the last: the table grows)
            data = text.encode()
            assert table.run_ids(data, by_table).tolist() == [one_by_one[run] for run in data.split()]
            assert list(by_table) == list(one_by_one)
