"""Word forms (lever `forms`): the spellings that share a word's root, pure."""

from __future__ import annotations

from hypothesis import given, strategies as st

from soma_lsp.query.word_forms import MIN_ROOT, forms, root


def test_code_and_notes_spellings_share_a_root():
    assert {root(w) for w in ("normalize", "normalisation", "normalised", "normalizing")} == {"normaliz"}
    assert {root(w) for w in ("initializer", "initialised", "initialization")} == {"initializ"}
    assert {root(w) for w in ("clip", "clipping", "clipped")} == {"clip"}
    assert {root(w) for w in ("embedding", "embeddings", "embed")} == {"embed"}


def test_short_words_and_words_with_digits_keep_their_root():
    assert root("layers") == "layer"  # not "lay": a root keeps MIN_ROOT letters
    assert root("lr") == "lr" and root("fp32") == "fp32" and root("norm") == "norm"
    assert forms("lr") == () and forms("fp32") == ()


def test_forms_list_the_other_spellings():
    assert {"initialised", "initialization", "initialise"} <= set(forms("initializer"))
    assert {"normalisation", "normalized"} <= set(forms("normalize"))
    assert "init" not in forms("initializer") and "norm" not in forms("normalize")


@given(st.text(alphabet="abcdeilnorstyz", min_size=1, max_size=14))
def test_every_form_shares_the_root_and_is_another_word(term):
    found = forms(term)
    assert term not in found
    assert all(root(f) == root(term) for f in found)
    assert len(root(term)) >= min(MIN_ROOT, len(term))
