"""Record text is data: whatever it holds, the server's Markdown renders it as inert text."""

from __future__ import annotations

import html as html_module
import re

import pytest
from markdown_it import MarkdownIt
from hypothesis import given, settings, strategies as st

from soma_lsp.server.features.hover import partial_note
from soma_lsp.server.markdown import defang, escape, plain

HOSTILE = [
    "[click](http://evil.example)", "[reload the pool](command:soma.reloadPool)", "command:soma.reloadPool",
    "<img src=x onerror=alert(1)>", "<script>alert(2)</script>", "`code`", "```\nfence\n```", "***bold em***",
    "| a | b |\n|---|---|", "# heading", "\\", "&amp;", "![img](http://x/y.png)", "<https://auto.link>",
    "www.evil.example", "mail me: a@b.example", "javascript:alert(document.cookie)", "[ref]: http://x",
    "1. list\n2. items", "> quote", "~~strike~~", "<b>html</b>", "line\u2028break\u202eoverride", "x" * 1000,
]


def markdown_it():
    """A CommonMark renderer with raw HTML and autolinks on: what a permissive client would do.

    Not linkify-it's fuzzy mode, which links any `word.tld` (`model.py`: Paraguay): no Markdown
    rule or LSP client does that, and defeating it would mean escaping every dot."""
    md = MarkdownIt("gfm-like", {"html": True, "linkify": True})
    md.linkify.set({"fuzzy_link": False})
    return md


def assert_inert_html(html: str) -> None:
    tags = set(re.findall(r"<\s*([a-zA-Z][\w-]*)", html))
    assert tags <= {"p"}, (tags, html)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_renders_as_one_plain_paragraph(text):
    md = markdown_it()
    out = escape(text)
    assert "\n" not in out
    assert_inert_html(md.render(out))


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_any_text_renders_inert(text):
    md = markdown_it()
    assert_inert_html(md.render(escape(text)))


@given(st.text(max_size=200))
def test_no_autolinkable_urls_survive(text):
    for out in (escape(text), plain(text)):
        assert not re.search(r"(?i)\b(https?|ftp|file|command|javascript|vscode|mailto|data):(?!\])", out.replace("\\", ""))
        assert not re.search(r"(?i)\bwww\.", out.replace("\\", ""))
        assert not re.search(r"\S@\S", out.replace("\\", "").replace("[@]", " "))


def test_defanged_text_still_reads_as_the_text():
    assert defang("see http://x.example/run and www.y.example") == "see http[:]//x.example/run and www[.]y.example"
    assert plain("loss:0.3 ratio: 2") == "loss:0.3 ratio: 2"  # ordinary colons are left alone
    assert plain("a\nb\tc\u202ed") == "a b c d"
    assert plain("x" * 500).endswith("…") and len(plain("x" * 500)) == 300


LEGIBLE = ["rope-theta-1m-bf16 · exp-0117", "cos/sin tables loses precision; lr 6e-4", "rope_theta=1e6 (x2)",
           "a < b > c", "50% of runs: +0.3 val_loss, 1. not a list", "v1.2 model.py exp.0117 #42 x=-1"]


@pytest.mark.parametrize("text", LEGIBLE)
def test_ordinary_record_text_is_written_as_is(text):
    """A client that shows the Markdown source (Neovim) shows the text exactly as written."""
    assert escape(text) == text


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_any_text_renders_as_itself(text):
    """What a Markdown renderer shows is the text (defanged), whatever the escapes."""
    html = markdown_it().render(escape(text)).strip()
    shown = html_module.unescape(re.sub(r"^<p>|</p>$", "", html)) if html else ""
    assert shown == plain(text)


@pytest.mark.parametrize("percent", range(0, 101))
def test_the_partial_note_of_a_hover_renders_as_itself(percent):
    """The line a hover ends with while the pool loads (features.hover.partial_note): plain text."""
    note = partial_note(percent)
    assert markdown_it().render(note) == f"<p>{html_module.escape(note, quote=False)}</p>\n"
    assert note == f"⏳ partial: the pool is still loading ({percent}%)"
