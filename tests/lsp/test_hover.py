"""Hover end to end, under each client preset: ties first, the gate, ids in code, escaping."""

from __future__ import annotations

import re

from lsprotocol import types as lsp
from markdown_it import MarkdownIt

from conftest import Session

TRANSFORMER = "model/transformer.py"


async def test_hover_on_rotary_embedding_shows_the_dead_end_first(session: Session):
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + len("class "))
    assert hover is not None
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    text = hover.contents.value
    blocks = text.split("\n\n---\n\n")
    first = blocks[0]
    # name, id, status, dead end, tied, age, score, every component with its weight, matches, headline
    assert "rope-theta-500k" in first and "exp-0042" in first
    assert "failed" in first and "dead end" in first and "tied to this code" in first
    assert re.search(r"\d+ (month|year|week|day)s? ago", first)
    assert re.search(r"score 0\.\d\d", first)
    for term in ("lexical", "structural", "recency", "importance"):
        assert re.search(rf"{term} (n/a|\d\.\d\d) ×\d\.\d\d", first), term
    assert "matched: " in first and "rope" in first
    assert "theta 500k diverges at 2k steps" in first
    # three in all (hover.count default), then how many more
    assert len([b for b in blocks if "🧪" in b or "⛔" in b]) == 3
    assert re.search(r"\d+\+? more related", blocks[-1])


async def test_hover_off_identifiers_and_on_unrelated_code_is_silent(session: Session, workspace):
    uri = session.open(TRANSFORMER)
    assert await session.hover(uri, 1, 0) is None  # inside the module docstring's blank-ish area
    blank = next(i for i, l in enumerate((workspace / TRANSFORMER).read_text().splitlines()) if not l.strip())
    assert await session.hover(uri, blank, 0) is None
    (workspace / "util.py").write_text("def frobnicate_widget(qux):\n    return qux\n")
    util = session.open("util.py")
    assert await session.hover(util, 0, 6) is None
    assert await session.hover(util, 1, 12) is None


async def test_hover_on_an_experiment_id_in_a_comment_shows_its_card(session: Session):
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "(exp-0042)")
    hover = await session.hover(uri, line, col + 3)
    assert hover is not None
    text = hover.contents.value
    assert text.startswith("**rope-theta-500k** · exp-0042")
    assert "theta 500k diverges at 2k steps" in text
    assert hover.range.start == lsp.Position(line, col + 1)
    assert hover.range.end == lsp.Position(line, col + 1 + len("exp-0042"))


async def test_hostile_record_text_is_inert(start_session, preset):
    session = await start_session(preset, init_options={"hover": {"count": 10}})
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class Attention")
    _, forward = session.line_of(TRANSFORMER, "def forward(self, x: torch.Tensor) -> torch.Tensor:")
    lines = session.path(TRANSFORMER).read_text().splitlines()
    target = next(i for i in range(line, len(lines)) if "def forward" in lines[i])
    hover = await session.hover(uri, target, lines[target].index("forward"))
    text = hover.contents.value
    assert "markdown-injection-check" in text
    assert_inert(text)
    card = await session.hover(session.open("notes.py", "# see exp-0666 for the escaping check\n"), 0, 8)
    assert "markdown-injection-check" in card.contents.value
    assert_inert(card.contents.value)


def assert_inert(text: str) -> None:
    """No link, image, HTML or code can come out of this Markdown, rendered as a permissive client
    would (raw HTML and linkify on), and no URL a client could make a link of is left."""
    renderer = MarkdownIt("gfm-like", {"html": True, "linkify": True})
    renderer.linkify.set({"fuzzy_link": False})
    html = renderer.render(text)
    tags = set(re.findall(r"<\s*([a-zA-Z][\w-]*)", html))
    assert tags <= {"p", "strong", "em", "hr", "blockquote", "br"}, tags  # the server's own markup only
    assert "<strong>bold</strong>" not in html and "<em>under</em>" not in html  # the record's markup
    for raw in ("command:", "http://", "https://", "javascript:", "www."):
        assert raw not in text, raw


async def test_plain_text_client_gets_plain_text(start_session):
    def plaintext_only(caps: lsp.ClientCapabilities) -> None:
        caps.text_document.hover.content_format = [lsp.MarkupKind.PlainText]

    session = await start_session("neovim@0.11.0", tweak=plaintext_only)
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + 6)
    assert hover.contents.kind == lsp.MarkupKind.PlainText
    text = hover.contents.value
    assert text.startswith("rope-theta-500k (exp-0042) — failed, dead end, ⚓ tied to this code")
    assert "\n  dead end: status failed\n" in text  # which rule made it a dead end


async def test_every_claim_explains_itself(session: Session):
    """A dead end by its metrics says each metric against baseline and goal; an `n/a` term is
    explained once, in a legend, since its weight went to the others."""
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    text = (await session.hover(uri, line, col + 6)).contents.value
    assert text.count("⚓ tied to this code") >= 1
    assert "n/a" in text and text.rstrip().endswith(
        "n/a: the term does not apply to this pair; its weight went to the terms that do (×: the weights used)*")


async def test_hover_works_on_broken_mid_edit_code(session: Session, workspace):
    text = (workspace / TRANSFORMER).read_text()
    broken = text.replace("class RMSNorm(nn.Module):", "def half_typed(x, :\n    return [x\n\nclass RMSNorm(nn.Module):", 1)
    uri = session.open(TRANSFORMER, broken)
    lines = broken.splitlines()
    line = next(i for i, l in enumerate(lines) if l.startswith("class RotaryEmbedding"))
    hover = await session.hover(uri, line, 8)
    assert hover is not None and "exp-0042" in hover.contents.value.split("---")[0]
    diagnostics = await session.diagnostics(uri, lambda d: any(x.code == "exp-0042" for x in d))
    assert any(d.code == "exp-0042" and d.range.start.line == line for d in diagnostics)


async def test_hover_on_a_document_nobody_opened_answers_empty_and_the_server_goes_on(session: Session):
    missing = session.uri("does/not/exist.py")
    assert await session.hover(missing, 0, 0) is None
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    assert await session.hover(uri, line, col + 6) is not None


async def test_hover_range_is_the_hovered_word(session: Session):
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + 10)
    assert hover.range == lsp.Range(lsp.Position(line, col + 6), lsp.Position(line, col + 6 + len("RotaryEmbedding")))
