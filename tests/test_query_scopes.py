"""Scopes (docs/spec.md §3), definitions and qualnames, text extraction and noise."""

import textwrap

import pytest

from soma_lsp.query import Levers, build_query, definitions, encloses, find_definition, related
from soma_lsp.query.identifiers import TERM_NOISE
from soma_lsp.retrieval.tokenize import tokenize

SRC = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    LR = 3e-4  # peak learning rate


    # Rotary position embedding; theta 500k diverged (see notes)
    class RotaryEmbedding(nn.Module):
        """Precomputes cos/sin tables for RoPE."""

        max_seq_len = 2048

        def __init__(self, head_dim, theta=10_000.0):
            super().__init__()
            self.theta = theta
            self.proj = nn.Linear(head_dim, head_dim)

        def forward(self, q, k):
            """Rotate queries and keys."""
            # apply the rotation in float32 for stability
            return self.rotate(q), self.rotate(k)

        class Cache:
            def lookup(self, seq_len):
                return None


    @torch.no_grad()
    def evaluate(model, batches):
        total = 0
        for b in range(len(batches)):
            total += model(batches[b]).loss
        return total
    ''')
P = "model/rope.py"


def terms_of(*words: str) -> set[str]:
    """The retrieval terms BuiltQuery.text carries for these words (one-letter ones dropped)."""
    return {t for w in words for t in tokenize(w) if len(t) > 1 and t not in TERM_NOISE}


def line_of(text: str, src: str = SRC) -> int:
    return next(i for i, line in enumerate(src.split("\n")) if text in line)


def col_of(text: str, src: str = SRC) -> int:
    line = src.split("\n")[line_of(text, src)]
    return line.index(text)


def test_definitions_qualnames_and_kinds():
    defs = definitions(SRC, P)
    got = [(d.qualname, d.kind) for d in defs]
    assert got == [
        ("RotaryEmbedding", "class"),
        ("RotaryEmbedding.__init__", "method"),
        ("RotaryEmbedding.forward", "method"),
        ("RotaryEmbedding.Cache", "class"),
        ("RotaryEmbedding.Cache.lookup", "method"),
        ("evaluate", "function"),
    ]
    rope = defs[0]
    assert rope.name == "RotaryEmbedding"
    assert rope.name_range == ((line_of("class Rotary"), 6), (line_of("class Rotary"), 21))
    assert rope.range[0] == (line_of("class Rotary"), 0)
    assert rope.range[1][0] == line_of("return None")
    ev = defs[-1]
    assert ev.range[0] == (line_of("@torch.no_grad"), 0)  # decorators belong to the definition
    assert ev.name_range[0] == (line_of("def evaluate"), 4)


def test_nested_function_qualname():
    src = "def outer():\n    def inner():\n        pass\n    return inner\n"
    assert [(d.qualname, d.kind) for d in definitions(src, "a.py")] == [
        ("outer", "function"), ("outer.inner", "function")]


def test_hover_inside_method_is_that_method():
    pos = (line_of("self.proj = nn.Linear"), col_of("Linear"))
    q = build_query(SRC, P, position=pos, scope="hover", levers=Levers(class_bag=False))
    assert q.scope.qualname == "RotaryEmbedding.__init__"
    assert q.word == "Linear"
    assert q.basis == "definition"
    assert q.architecture == {"Linear": 1.0}  # the scope's own (the class-bag lever: test_query_levers)
    words = q.text.split()
    assert terms_of("theta", "proj", "Linear", "head_dim", "RotaryEmbedding") <= set(words)
    assert "forward" not in words  # another method


def test_hover_on_class_line_and_class_body_is_the_class():
    q = build_query(SRC, P, position=(line_of("class Rotary"), 10), scope="hover")
    assert q.scope.qualname == "RotaryEmbedding"
    assert q.word == "RotaryEmbedding"
    q2 = build_query(SRC, P, position=(line_of("max_seq_len = 2048"), 6), scope="hover")
    assert q2.scope.qualname == "RotaryEmbedding"
    assert q2.word == "max_seq_len"


def test_hover_between_definitions_has_no_scope():
    q = build_query(SRC, P, position=(line_of("LR = 3e-4"), 0), scope="hover")
    assert q.scope is None
    assert q.word == "LR"
    assert q.basis == "statement"
    assert "lr" in q.text.split()
    blank = line_of("class Rotary") - 2
    q2 = build_query(SRC, P, position=(blank, 0), scope="hover")
    assert q2.scope is None and q2.word is None


def test_hover_nested_and_decorated():
    q = build_query(SRC, P, position=(line_of("return None"), 10), scope="hover")
    assert q.scope.qualname == "RotaryEmbedding.Cache.lookup"
    q2 = build_query(SRC, P, position=(line_of("@torch.no_grad"), 3), scope="hover")
    assert q2.scope.qualname == "evaluate"


def test_lens_is_the_definition_on_that_line():
    for d in definitions(SRC, P):
        q = build_query(SRC, P, position=d.name_range[0], scope="lens")
        assert q.scope == d
    q = build_query(SRC, P, position=(0, 0), scope="lens")
    assert q.scope is None and q.basis == "file"


def test_find_selection_then_definition_then_file():
    start = (line_of("self.theta = theta"), 0)
    end = (line_of("self.proj = nn.Linear"), 40)
    q = build_query(SRC, P, selection=(start, end), position=end, scope="find")
    assert q.basis == "selection"
    assert q.scope.qualname == "RotaryEmbedding.__init__"  # encloses the selection (for ties)
    assert set(q.text.split()) == terms_of("theta", "proj", "Linear", "head_dim")
    assert q.architecture == {"Linear": 1.0}
    # reversed selection is the same
    assert build_query(SRC, P, selection=(end, start), scope="find").text == q.text
    # empty selection → the enclosing definition
    q2 = build_query(SRC, P, selection=(start, start), position=start, scope="find")
    assert q2.basis == "definition" and q2.scope.qualname == "RotaryEmbedding.__init__"
    # nothing enclosing → the whole file
    q3 = build_query(SRC, P, position=(1, 0), scope="find")
    assert q3.scope is None and q3.basis == "file"
    assert q3.text == build_query(SRC, P, scope="file").text


def test_file_scope_covers_everything():
    q = build_query(SRC, P, position=(line_of("return total"), 8), scope="file")
    assert q.scope is None and q.basis == "file"
    assert terms_of("RotaryEmbedding", "evaluate", "LR", "lookup") <= set(q.text.split())
    assert q.architecture == {"Linear": 1.0}


def test_noise_is_removed():
    words = set(build_query(SRC, P, scope="file").text.split())
    for noise in ("self", "cls", "none", "true", "return", "def", "class", "import", "for", "in",
                  "range", "super", "init", "b", "q", "k", "nn", "the", "and"):
        assert noise not in words, noise
    assert "torch" in words


def test_docstring_and_comment_words_are_included():
    q = build_query(SRC, P, position=(line_of("return self.rotate"), 12), scope="hover")
    words = q.text.split()
    assert terms_of("Rotate", "queries", "keys", "rotation", "float32", "stability") <= set(words)
    assert "the" not in words and "and" not in words  # stop words
    # the comment block directly above a class belongs to it
    q2 = build_query(SRC, P, position=(line_of("class Rotary"), 8), scope="hover")
    assert terms_of("Rotary", "diverged", "500k", "RoPE", "Precomputes") <= set(q2.text.split())
    assert "rope" in tokenize(q2.text)


def test_other_string_literals_are_not_text():
    src = 'def f():\n    name = "zebra_giraffe"\n    return name\n'
    assert "zebra" not in build_query(src, "a.py", scope="file").text


def test_ranges_in_utf16_with_non_ascii_before_the_cursor():
    src = 'def f():\n    s = "😀é"; target = compute(s)\n\nclass 数据:\n    def ça(self): pass\n'
    line = src.split("\n")[1]
    ci = line.index("target")
    assert ci == 14
    utf16 = ci + 1  # the emoji is two UTF-16 units
    q = build_query(src, "a.py", position=(1, utf16), scope="hover")
    assert q.word == "target" and q.scope.qualname == "f"
    assert q.word_range == ((1, utf16), (1, utf16 + 6))
    q_cp = build_query(src, "a.py", position=(1, ci), scope="hover")  # one unit early: the quote
    assert q_cp.word is None or q_cp.word != "target"
    defs = definitions(src, "a.py")
    cls = find_definition(defs, "数据")
    assert cls.name_range == ((3, 6), (3, 8))
    meth = find_definition(defs, "数据.ça")
    assert meth.kind == "method" and meth.name_range == ((4, 8), (4, 10))
    # a line with an astral character before a definition name
    src2 = "x = '😀'; y = 1\ndef g(): pass\n"
    assert definitions(src2, "b.py")[0].name_range == ((1, 4), (1, 5))
    src3 = "class A:\n    s = '😀😀'; \n    def m(self): return '😀'\n"
    m = find_definition(definitions(src3, "c.py"), "A.m")
    assert m.range[1] == (2, 28)  # end of the line in UTF-16 units: 27 code points, one astral


def test_word_under_cursor_edges():
    src = "alpha_beta = gamma\n"
    assert build_query(src, "a.py", position=(0, 0), scope="hover").word == "alpha_beta"
    assert build_query(src, "a.py", position=(0, 10), scope="hover").word == "alpha_beta"  # just after
    assert build_query(src, "a.py", position=(0, 11), scope="hover").word is None
    assert build_query(src, "a.py", position=(0, 18), scope="hover").word == "gamma"
    assert build_query(src, "a.py", position=(5, 99), scope="hover").word is None


def test_find_definition_and_tie_helpers():
    defs = definitions(SRC, P)
    assert find_definition(defs, "RotaryEmbedding.forward").name == "forward"
    assert find_definition(defs, "Cache.lookup").qualname == "RotaryEmbedding.Cache.lookup"
    assert find_definition(defs, "nope") is None
    assert find_definition(defs, "") is None
    cls = find_definition(defs, "RotaryEmbedding")
    meth = find_definition(defs, "RotaryEmbedding.forward")
    assert encloses(cls, meth) and not encloses(meth, cls)
    assert encloses("RotaryEmbedding", "RotaryEmbedding.Cache.lookup")
    assert not encloses("Rotary", "RotaryEmbedding")
    assert related("RotaryEmbedding", meth) and related(meth, "RotaryEmbedding")
    assert related("evaluate", "evaluate")
    assert not related("RotaryEmbedding.forward", "RotaryEmbedding.__init__")


@pytest.mark.parametrize("scope", ["hover", "lens", "find", "file"])
def test_scope_without_position(scope):
    q = build_query(SRC, P, scope=scope)
    assert q.scope is None and q.text


def test_lens_with_two_definitions_on_one_line():
    src = "class Foo { bar(x) { return x; } }\n"
    defs = definitions(src, "a.js")
    assert [d.qualname for d in defs] == ["Foo", "Foo.bar"]
    for d in defs:
        assert build_query(src, "a.js", position=d.name_range[0], scope="lens").scope == d
    assert build_query(src, "a.js", position=(0, 0), scope="lens").scope.qualname == "Foo"


def test_method_text_names_its_class():
    q = build_query(SRC, P, position=(line_of("return None"), 10), scope="hover")
    assert q.text.split()[:4] == ["rotary", "embedding", "rotaryembedding", "cache"]
    assert "lookup" in q.text.split()
    # a selection is taken as written
    line = line_of("self.theta = theta")
    q2 = build_query(SRC, P, selection=((line, 0), (line, 30)), scope="find")
    assert "rotaryembedding" not in q2.text.split()


def test_text_is_retrieval_terms_without_noise_parts():
    src = "def attend(q_proj, is_causal, multiple_of, isTraining, RoPE):\n    pass\n"
    q = build_query(src, "a.py", position=(1, 4), scope="hover")
    assert q.text.split() == ["attend", "proj", "causal", "multiple", "training", "istraining",
                              "ro", "pe", "rope"]
    assert tokenize(q.text) == q.text.split()  # the core sees exactly these terms


def test_attribute_names_are_not_builtins():
    src = "model = torch.compile(model)\nn = len(x.float().sum())\n"
    words = build_query(src, "train.py", scope="file").text.split()
    assert "compile" in words and "float" in words and "sum" in words
    assert "len" not in words


def test_the_query_is_finished_by_the_builder():
    """`ask` is the scope's text with the hovered word in front when its terms are missing — built
    once here, so nothing above re-tokenises; `retrieval_query` carries it (or a given text) and the
    scope's component bag to the core."""
    from datetime import datetime, timezone

    from soma_lsp.query import retrieval_query
    from soma_lsp.retrieval import DEFAULT_WEIGHTS

    src = 'def schedule(step):\n    kind = "cosine"\n    return kind\n'
    on_string = build_query(src, "a.py", position=(1, 13), scope="hover")  # string literals are not text
    assert (on_string.word, on_string.text) == ("cosine", "schedule step kind")
    assert on_string.ask == "cosine schedule step kind"
    on_name = build_query(src, "a.py", position=(2, 12), scope="hover")
    assert on_name.word == "kind" and on_name.ask == on_name.text  # already there: nothing added
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    query = retrieval_query(on_string, now, half_life_days=30.0, weights=DEFAULT_WEIGHTS, limit=5)
    assert (query.text, query.now, query.limit, query.half_life_days) == (on_string.ask, now, 5, 30.0)
    given = retrieval_query(on_string, now, half_life_days=30.0, weights=DEFAULT_WEIGHTS, limit=None,
                            text="attention sinks")
    assert given.text == "attention sinks"
    assert retrieval_query(None, now, half_life_days=30.0, weights=DEFAULT_WEIGHTS, limit=None).text == ""
