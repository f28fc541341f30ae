"""The query builder: open document + position → what to ask the retrieval core (docs/spec.md §3).

Pure: no I/O, no pygls/lsprotocol. Positions are LSP's: 0-based ``(line, character)`` with
characters counted in **UTF-16 code units** (``soma_lsp.query.positions.LineIndex`` converts to and
from code-point offsets: ``offset`` / ``position``). Out-of-range positions are
clamped; nothing here raises on any text or position.

Scopes (``scope=``):

* ``"hover"`` — the innermost definition (function, method, class) enclosing the cursor, plus the
  word under it (``BuiltQuery.word``: the letters/digits/``_`` run at or just before the cursor;
  None on whitespace, on a keyword or other noise word, on a bare number). Outside any
  definition ``scope`` is None and the text is the top-level statement under the cursor (the
  line, when the file does not parse cleanly).
* ``"lens"`` — the definition whose name is on the position's line (else the innermost one
  enclosing it); with none, the whole file (a file-level lens).
* ``"find"`` — the selection (``scope`` is then the innermost definition containing it, for ties),
  else the definition enclosing ``position``, else the whole file.
* ``"file"`` — the whole file.

``BuiltQuery.text`` holds the identifiers of the scope's code (noise removed, see
``identifiers``), then the words of its comments and docstrings (stop words removed), including
a comment block directly above a definition; a definition's text starts with the names of the
definitions enclosing it (``RotaryEmbedding`` for ``RotaryEmbedding.forward``). It is written as
the distinct retrieval terms of those words (``soma_lsp.retrieval.tokenize``), in order of first
appearance, minus the terms that are stop words or one character — so ``is_causal`` and
``multiple_of`` do not make a query match every note containing "is" or "of". Other string literals are not part of
it. ``architecture`` is the scope's component bag (see ``architecture``).

The query is finished here, once: ``BuiltQuery.ask`` is the text to rank with — ``text`` with the
word under the cursor in front when its terms are not already in it (so a hover on ``rope`` inside
a long function still asks about ``rope``) — and ``retrieval_query`` turns a built query into the
core's ``RetrievalQuery``. Callers above never re-tokenise or edit a query.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ..knobs import line_settings
from ..retrieval import RetrievalQuery, Weights, tokenize
from .architecture import NOT_COMPONENTS, bag_of, config_selection_bag
from .definitions import Definition, encloses, find_definition, innermost, related
from .document import parse
from .identifiers import STOP_WORDS, code_noise, is_noise_identifier, prose_words, terms_text, word_at
from .identifiers import identifiers as _identifiers
from .languages import CONFIG_LANGUAGES, language_for_path
from .levers import ALL_ON, Levers
from .vocabulary import expand
from .positions import LineIndex, Position, Range, index_to_utf16, split_lines, utf16_len, utf16_to_index

Scope = Literal["hover", "lens", "find", "file"]
Basis = Literal["definition", "selection", "statement", "line", "file"]


@dataclass(frozen=True)
class BuiltQuery:
    """What to rank against. ``scope`` is the Definition the query is about (None: no definition —
    the whole file, or a statement/selection outside any); ``basis`` says which text was used and
    ``range`` where it lies (LSP positions)."""

    text: str
    architecture: dict[str, float] = field(default_factory=dict)
    scope: Definition | None = None
    word: str | None = None
    basis: Basis = "file"
    range: Range = ((0, 0), (0, 0))
    language: str = "text"
    word_range: Range | None = None  # where ``word`` is (for the hover's range)
    ask: str = ""  # the text to rank with: ``text``, the word in front when missing (module docstring)
    hints: Hints = field(default_factory=lambda: NO_HINTS)  # for the server's gate and order (levers)


@dataclass(frozen=True)
class Hints:
    """What the server's gate and ordering need of a built query beyond its text (issue-20 levers):
    ``focus`` the terms of the cursor's own line (lever `cursor`; empty for a lens, which is about the
    whole definition — find-related at a lens's position counts the same records, in another
    order), ``settings`` the (knob, canonical value, as written) set on that line (lever `knob`),
    ``aliases`` the alias groups that fired (lever `aliases`: one idea each), ``word`` the terms of
    the word under the cursor (lever `cursor`: a record matching it is evidence enough for
    find-related), ``in_body`` whether the cursor's line lies in the scope's body rather than on its
    name line (lever `tie_focus`: a tie to the enclosing definition is about that definition, not
    about a line of its body), ``knob`` the word under the cursor, lower-cased (lever `knob`: when its
    line sets no value for it, the runs that set that knob, named after it or its value, are what it
    points at — `guidance_scale` in `uncond + guidance_scale * (cond - uncond)`; when its line sets
    several knobs, the one under the cursor is the one asked), ``reads`` the settings the cursor's line,
    or the condition it runs under, reads from a config object (lever `knob`: `args.policy_frequency`
    in `update_actor_now = global_step % args.policy_frequency == 0`, `args.learning_starts` of the `if`
    above a line; `config_reads`), ``body_reads`` on a function's own name line the settings its body reads
    from a config object (lever `knob`: the runs about them move up, `body_reads`), ``others`` the terms
    of each other definition of the file, for a definition find-related asks from a position in a file of at
    least `HUB_DEFINITIONS` definitions (lever `hubs`: a record overlapping most of them is about the file;
    not for a hover, which is latency-bound: the terms of every definition cost the first hover after an
    edit of a 1,500-line file 17 ms more, 30 → 48 ms), ``on_name`` whether the word under the cursor is the
    scope's own name on its name line (lever `named` stays off there: the whole definition is asked, and its
    name's terms are the line's already)."""

    focus: tuple[str, ...] = ()
    settings: tuple[tuple[str, str, str], ...] = ()
    aliases: tuple[tuple[str, ...], ...] = ()
    word: tuple[str, ...] = ()
    in_body: bool = False
    knob: str = ""
    reads: tuple[str, ...] = ()
    body_reads: tuple[str, ...] = ()
    others: tuple[frozenset[str], ...] = ()
    on_name: bool = False

    @property
    def near(self) -> tuple[str, ...]:
        """The terms near the cursor: its line's, the word's, and the other names of the ideas named
        there (the alias groups that fired) — what a record must match to be about the cursor's line."""
        return tuple(dict.fromkeys((*self.focus, *self.word, *(t for group in self.aliases for t in group))))


NO_HINTS = Hints()


def _ask(text: str, word: str | None) -> str:
    if word:
        present = set(tokenize(text))
        if not all(term in present for term in tokenize(word)):
            return f"{word} {text}"  # (the query's terms are distinct: only new ones matter)
    return text


def retrieval_query(built: BuiltQuery | None, now: datetime | None, *, half_life_days: float,
                    weights: Weights, limit: int | None, text: str | None = None) -> RetrievalQuery:
    """The core's query for a built scope (``ask`` and its component bag); ``text``, when given,
    replaces the scope's words (the bag is kept)."""
    if text is None:
        text = built.ask if built is not None else ""
    return RetrievalQuery(
        text=text,
        architecture=dict(built.architecture) if built is not None and built.architecture else None,
        now=now, half_life_days=half_life_days, limit=limit, weights=weights)


def definitions(source: str, path: str) -> list[Definition]:
    """The file's definitions in source order (outer before inner)."""
    try:
        return list(parse(source, path).defs)
    except Exception:  # never let a query break a feature
        return []


def architecture_bag(source: str, path: str) -> dict[str, float]:
    """The whole file's component bag (Python instantiations, or config components)."""
    try:
        doc = parse(source, path)
        if doc.arch is not None:
            return bag_of(doc.calls)
        if doc.lang in CONFIG_LANGUAGES:
            return doc.config_bag()
    except Exception:
        pass
    return {}


def _word(doc, position: Position) -> tuple[str, Range] | None:
    line_no, character = position
    if not 0 <= line_no < len(doc.index.lines):
        return None
    line = doc.index.lines[line_no]
    span = word_at(line, utf16_to_index(line, character))
    if span is None:
        return None
    w = line[span[0]:span[1]]
    if w.isdigit() or is_noise_identifier(w, code_noise(doc.lang)):
        return None
    return w, ((line_no, index_to_utf16(line, span[0])), (line_no, index_to_utf16(line, span[1])))


def _leading_comments(doc, start: int) -> int:
    """Offset of a comment block directly above the line holding ``start`` (no blank line in
    between), else ``start``."""
    markers = doc.comment_markers
    if not markers:
        return start
    row, _ = doc.index.position(start)
    first = row
    while first > 0 and doc.index.lines[first - 1].lstrip().startswith(markers):
        first -= 1
    return doc.index.starts[first] if first < row else start


def _text(doc, start: int, end: int, text_start: int | None = None,
          scope: Definition | None = None) -> str:
    ts = start if text_start is None else text_start
    # a method is about its class too: `forward` of RotaryEmbedding speaks of rotary embeddings
    words = [p for p in scope.qualname.split(".")[:-1]
             if not is_noise_identifier(p, code_noise(doc.lang))] if scope is not None else []
    if not doc.has_grammar:  # config, unknown language, grammar not installed: every word
        noise = code_noise(doc.lang) | STOP_WORDS
        words += [w for w in _identifiers(doc.source[ts:end], noise) if w.lower() not in STOP_WORDS]
    else:
        words += _identifiers(doc.masked[ts:end], code_noise(doc.lang))
        words += _prose_between(doc, ts, end)
    return terms_text(words)


def _prose_between(doc, start: int, end: int) -> list[str]:
    """The words of the comments and docstrings (`doc.prose`) within [start, end). The spans are sorted
    and apart (comments and strings do not nest), so only the span just before the first one starting
    at `start` may reach into it: found by bisection — a scan from the file's first span made lever
    hubs' text of every definition quadratic in a file's definitions."""
    spans, words = doc.prose, []
    for k in range(max(0, bisect_left(spans, (start,)) - 1), len(spans)):
        ps, pe = spans[k]
        if ps >= end:
            break
        if pe > start:
            words.extend(prose_words(doc.source[max(ps, start):min(pe, end)]))
    return words


def _bag(doc, start: int, end: int, whole: bool, cls: Definition | None = None) -> dict[str, float]:
    if doc.arch is not None:
        if cls is not None:
            return _class_bag(doc, cls)
        return bag_of(doc.calls, start, end)
    if doc.lang in CONFIG_LANGUAGES:
        return doc.config_bag() if whole else config_selection_bag(doc.source[start:end], doc.lang)
    return {}


def _class_of(doc, scope: Definition | None) -> Definition | None:
    """The class a scope belongs to (itself when it is one): its bag is the class's (lever
    `class_bag`) — `forward` uses what `__init__`/`setup`/`build` made, `@compact` builds in place."""
    if scope is None:
        return None
    if scope.kind == "class":
        return scope
    parts = scope.qualname.split(".")
    for i in range(len(parts) - 1, 0, -1):
        owner = next((d for d in doc.defs if d.qualname == ".".join(parts[:i]) and d.kind == "class"), None)
        if owner is not None:
            return owner
    return None


def _class_bag(doc, cls: Definition) -> dict[str, float]:
    """The components a class builds, plus its own name and its bases (but `nn.Module` and kin):
    a record about `RotaryEmbedding` matches the code of `class RotaryEmbedding` itself."""
    bag = bag_of(doc.calls, *cls.offsets)
    header = doc.masked[cls.offsets[0]:cls.offsets[1]].split(":", 1)[0]
    bases = header[header.find("(") + 1:header.rfind(")")].split(",") if "(" in header else []
    for name in [cls.name, *bases]:
        name = name.strip().rsplit(".", 1)[-1]
        if name.isidentifier() and name not in NOT_COMPONENTS and name[:1].isupper():
            bag[name] = bag.get(name, 0.0) + 1.0
    return bag


def _near_aliases(text: str, focus: tuple[str, ...], word: str | None, names: list[str],
                  levers: Levers) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """Lever `aliases`: the other names of the ideas named *near the cursor* — on its line (`focus`,
    its identifiers `names`) or the word under it — added to the scope's terms; and the alias groups
    that fired. Expanding the whole scope's terms was measured and dropped: a long function names
    many ideas in passing, and their aliases pulled in records about them (docs/benchmarks.md § Quality)."""
    if not levers.aliases:
        return text, ()
    near = list(focus) + (tokenize(word) if word else [])
    expanded, groups = expand(near, names + ([word] if word else []))
    return " ".join(dict.fromkeys(text.split() + expanded[len(near):])), groups


_DEFAULTED = re.compile(r"([A-Za-z_]\w*)\s*(?::[^=,()]*)?=(?!=)")
_SIGNATURE_END = re.compile(r"\)\s*(?:->[^\n]*)?:[ \t]*(?:#[^\n]*)?$", re.M)  # `):`, `) -> None:`


def _constructor_settings(doc, cls: Definition) -> list[str]:
    """The parameters with a default of a class's `__init__` (`n_mels=80, hop_length=160`): on the
    class's name line they join the line's names (lever `cursor`) — the line names the class, and
    what a run changes in it is one of the settings it takes, while the class's body is full of
    plumbing words (`conv`, `norm`, `module`) that runs about other parts share (docs/benchmarks.md
    § Quality, try 103). Only the line's bonus: taking them as the line's settings (the knob tier,
    try 49) cost the first set."""
    init = next((d for d in doc.defs if d.qualname == f"{cls.qualname}.__init__"), None)
    if init is None:
        return []
    head = doc.source[doc.index.offset(init.name_range[0]):init.offsets[1]]
    end = _SIGNATURE_END.search(head)
    return [p for p in _DEFAULTED.findall(head[:end.start()] if end else head.split("\n", 1)[0]) if len(p) > 1]


def _description(doc, scope: Definition, text_start: int | None) -> list[str]:
    """The words a definition says of itself: its docstring, the comments between its signature and
    its first line of code, and the comment block right above it (`text_start`). On its own name line
    they join the line's terms (lever `cursor`): there the line is the signature, which names what the
    definition takes (`x`, `images`, `teacher_temp`: the inputs its file's other definitions take too),
    while the description says what it does — "pushes each class token away from its nearest
    neighbour" at `class KoLeoLoss` (docs/benchmarks.md § Quality, try 150). The words are added after
    the aliases of the line are asked: a description names ideas in passing, as a scope does."""
    if not doc.has_grammar:
        return []
    lines, starts = doc.index.lines, doc.index.starts
    row = scope.name_range[0][0]
    last = row + _statement_lines(doc, row).count("\n")  # the signature's last line
    code = scope.offsets[1]
    for r in range(last + 1, min(len(lines), scope.range[1][0] + 1)):
        if doc.masked[starts[r]:starts[r] + len(lines[r])].strip():
            code = starts[r]  # the body's first line of code
            break
    return _prose_between(doc, scope.offsets[0] if text_start is None else text_start, code)


#: Lever `hubs`: the definitions a file needs for its other definitions to tell a record about the
#: whole file from one about the scope asked.
HUB_DEFINITIONS = 3


def _other_definitions(doc, scope: Definition) -> tuple[frozenset[str], ...]:
    """The terms of each definition of the file but `scope` (lever `hubs`), from the terms of every
    definition's text (as a lens asks it), made once per parse; none in a file of fewer than
    `HUB_DEFINITIONS` definitions."""
    terms = doc.memo.get("definition_terms")
    if terms is None:
        terms = tuple((d.qualname, frozenset(_text(doc, *d.offsets, _leading_comments(doc, d.offsets[0]), d).split()))
                      for d in doc.defs)
        doc.memo["definition_terms"] = terms
    if len(terms) < HUB_DEFINITIONS:
        return ()
    return tuple(words for qualname, words in terms if qualname != scope.qualname)


def _line_names(doc, pos: Position | None, basis: str, levers: Levers) -> list[str]:
    """The identifiers of the cursor's own line, when the scope is larger than that line."""
    if not levers.cursor or pos is None or basis not in ("definition", "statement", "file"):
        return []
    if doc.has_grammar:
        line = _statement_lines(doc, pos[0])
    else:
        line = doc.index.lines[pos[0]] if 0 <= pos[0] < len(doc.index.lines) else ""
    return _identifiers(line, code_noise(doc.lang) | STOP_WORDS)


_OPEN, _CLOSE = "([{", ")]}"
#: How many lines a statement opened on the cursor's line is followed for (lever `cursor`).
STATEMENT_LINES = 8


def _statement_lines(doc, row: int) -> str:
    """The cursor's line and, when it opens brackets it does not close (`param_dicts = [`,
    `parser.add_argument(`), the lines up to the one that closes them, at most `STATEMENT_LINES` (lever
    `cursor`): the statement the user points at is one line of the editor's but several of the file's
    (`"lr": args.lr_backbone` two lines below `param_dicts = [`; docs/benchmarks.md § Quality, try 110)."""
    lines, masked = doc.index.lines, doc.masked
    depth, last = 0, row
    while last < len(lines) and last < row + STATEMENT_LINES:
        start = doc.index.starts[last]
        for ch in masked[start:start + len(lines[last])]:
            depth += (ch in _OPEN) - (ch in _CLOSE)
        if depth <= 0:
            break
        last += 1
    return "\n".join(lines[row:min(last, len(lines) - 1) + 1])


def line_knobs(line: str, config: bool = False) -> tuple[tuple[str, str, str], ...]:
    """The (knob, canonical value, as written) a line of code or of a config file (`config`) sets
    (`soma_lsp.knobs`), by the knob's last name (`config.ema_decay` → `ema_decay`): what lever `knob`
    compares with records."""
    return tuple((key.rsplit(".", 1)[-1], knob.value, knob.text)
                 for key, knob in line_settings(line, config).items() if "." not in key)


#: A setting read from a config object: `args.lr`, `cfg.train.ema_start`, `config["clip_eps"]`, `self.cfg.tau`
#: (the last name is the knob). The object's name is what trainers call their settings.
_CONFIG_READ = re.compile(r"\b(?:cfg|config|conf|args|hparams|hps|flags|FLAGS|opt|opts|options)\b"
                          r"((?:\.[A-Za-z_]\w*|\[[\"'][A-Za-z_]\w*[\"']\])+)")


_BLOCK = re.compile(r"(?:if|elif|while|for|with)\b.*:$")
_ELSE = re.compile(r"else\s*:")


def _guard(lines: list[str], row: int) -> str:
    """The header of the block a line of Python runs in (`if global_step < args.learning_starts:` for
    the line under it; the `if` of an `else:`), or "" — what decides whether the line runs at all."""
    indent = len(lines[row]) - len(lines[row].lstrip())
    for r in range(row - 1, -1, -1):
        stripped = lines[r].strip()
        lead = len(lines[r]) - len(lines[r].lstrip())
        if not stripped or stripped.startswith("#") or lead >= indent:
            continue
        if _ELSE.match(stripped):  # an `else:` runs under the `if` it closes, at its own indent
            indent = lead + 1
            continue
        return stripped if _BLOCK.match(stripped) else ""
    return ""


_SELF_SET = re.compile(r"^[ \t]*self\.([A-Za-z_]\w*)[ \t]*=[ \t]*(\S+?)[ \t]*$", re.M)
_SELF_READ = re.compile(r"\bself\.([A-Za-z_]\w*)")


def _knob_of(read: str) -> str:
    """The knob a config read names: its last name, lower-cased (`.train.ema_start` → `ema_start`)."""
    return re.findall(r"[A-Za-z_]\w*", read)[-1].lower()


#: A setting read by its key from any mapping: `o["freeze_last_layer_epochs"]`, `cfg["train"]["batch_size"]`
#: (the last key is the knob) — a config loaded from YAML or JSON is a dict under any name (`o = cfg["optim"]`).
#: A key names a setting as plainly as an attribute of `cfg` does; `batch["labels"]` reads no setting, and
#: the runs asked are only those that set the key and are about it (`evidence.read_runs`).
_KEY_READ = re.compile(r"\b[A-Za-z_]\w*((?:\[[\"'][A-Za-z_]\w*[\"']\])+)")


def _read_knobs(text: str) -> list[str]:
    """The knobs a text reads from a config object (`_CONFIG_READ`) or by a string key from any mapping
    (`_KEY_READ`), once each, in the order they are read."""
    reads = sorted((m.start(), _knob_of(m.group(1))) for pattern in (_CONFIG_READ, _KEY_READ)
                   for m in pattern.finditer(text))
    return list(dict.fromkeys(knob for _, knob in reads))


def copied_settings(doc, cls: Definition | None) -> dict[str, str]:
    """Attribute → the setting a class copies into it from a config object (`self.top_k =
    config.num_experts_per_tok` in its `__init__`): the way Hugging Face-style modules keep their
    config, so that the body reads `self.top_k` where the runs name `num_experts_per_tok`. Only a
    statement whose whole right side is the read: `self.scale = config.dim ** -0.5` is a value made from
    a setting, not the setting (docs/benchmarks.md § Quality, try 138)."""
    if cls is None or cls.kind != "class":
        return {}
    out: dict[str, str] = {}
    for attr, value in _SELF_SET.findall(doc.source[cls.offsets[0]:cls.offsets[1]]):
        read = _CONFIG_READ.fullmatch(value)
        if read is not None:
            out.setdefault(attr, _knob_of(read.group(1)))
    return out


def config_reads(doc, pos: Position | None, skip: set[str], cls: Definition | None = None) -> tuple[str, ...]:
    """The knobs the cursor's line reads from a config object (`args.policy_frequency`), and in Python
    those of the block header it runs under (`if global_step < args.learning_starts:` above
    `action = env.action_space.sample()`), and those it reads through an attribute its class `cls` copied
    from one (`self.top_k`, `copied_settings`), but those in `skip` (the line's settings and the word under
    the cursor, asked already): lever `knob` brings the runs about them after the top ranked record
    (docs/benchmarks.md § Quality, tries 120–122, 138). The header's other words are not of the line:
    taken into the line's bonus they cost the held-out third (try 131); `self.` taken as a config object
    reads plumbing as often as settings (try 135)."""
    if pos is None or not 0 <= pos[0] < len(doc.index.lines):
        return ()
    line = doc.index.lines[pos[0]]
    if doc.lang == "python":
        line += "\n" + _guard(doc.index.lines, pos[0])
    reads = _read_knobs(line)
    if doc.lang == "python":
        copied = copied_settings(doc, cls)
        reads += [copied[attr] for attr in _SELF_READ.findall(line) if attr in copied]
    return tuple(dict.fromkeys(k for k in reads if k not in skip))


def body_reads(doc, scope: Definition, skip: set[str]) -> tuple[str, ...]:
    """The settings a function reads from a config object anywhere in its body (`make_lora_config(args)`
    reads `args.lora_r`, `args.lora_dropout`), but those in `skip`: on the function's own name line the
    whole function is asked, and what a run changes in it is one of them — lever `knob` moves the runs
    about them up by `evidence.READ_BONUS`, not into a tier (docs/benchmarks.md § Quality, try 141).
    Joined to the line's words (try 132) they cost the held-out third; on a class's name line they moved
    a mixtral probe down and none up."""
    source = doc.source[scope.offsets[0]:scope.offsets[1]]
    return tuple(dict.fromkeys(k for k in _read_knobs(source) if k not in skip))


def _line_settings(doc, pos: Position | None, levers: Levers) -> tuple[tuple[str, str, str], ...]:
    if not levers.knob or pos is None or not 0 <= pos[0] < len(doc.index.lines):
        return ()
    return line_knobs(doc.index.lines[pos[0]], doc.lang in CONFIG_LANGUAGES)


def build_query(
    source: str,
    path: str,
    *,
    position: Position | None = None,
    selection: Range | None = None,
    scope: Scope = "find",
    levers: Levers = ALL_ON,
) -> BuiltQuery:
    """Build the query for a document, a position and a scope (see the module docstring).
    ``position`` is (line, UTF-16 character); ``selection`` is (start, end) positions, either
    order. Never raises: on an internal error the whole file's words are the text."""
    try:
        return _build_query(source, path, position, selection, scope, levers)
    except Exception:  # a bug here must not take hover/lens/find down with it
        words = _identifiers(source, code_noise("text") | STOP_WORDS)
        text = " ".join(dict.fromkeys(words))
        return BuiltQuery(text, ask=text)


def _build_query(source: str, path: str, position, selection, scope, levers: Levers = ALL_ON) -> BuiltQuery:
    doc = parse(source, path)
    index = doc.index
    n = len(source)
    pos = None
    if position is not None:
        pos = index.position(index.offset(tuple(position)))  # clamped
    found = _word(doc, pos) if pos is not None else None
    word, word_range = found if found is not None else (None, None)

    start, end, text_start, scope_def, basis = 0, n, None, None, "file"
    sel = None
    if selection is not None and scope == "find":
        a, b = index.offset(tuple(selection[0])), index.offset(tuple(selection[1]))
        if a != b:
            sel = (min(a, b), max(a, b))
    if scope == "find" and sel is not None:
        start, end = sel
        basis = "selection"
        s_pos, e_pos = index.position(start), index.position(end)
        cands = [d for d in doc.defs if d.contains(s_pos) and d.contains(e_pos)]
        scope_def = max(cands, key=lambda d: d.range[0]) if cands else None
    elif scope in ("hover", "lens", "find") and pos is not None:
        d = None
        if scope == "lens":  # the definition named on this line: the last name at or before pos
            on_line = [x for x in doc.defs if x.name_range[0][0] == pos[0]]
            before = [x for x in on_line if x.name_range[0] <= pos]
            d = max(before, key=lambda x: x.name_range[0]) if before else (
                min(on_line, key=lambda x: x.name_range[0]) if on_line else None)
        if d is None:
            d = innermost(doc.defs, pos)
        if d is not None:
            scope_def, basis = d, "definition"
            start, end = d.offsets
            text_start = _leading_comments(doc, start)
        elif scope == "hover":
            off = index.offset(pos)
            stmt = next(((s, e) for s, e in doc.statements if s <= off <= e), None)
            if stmt is not None:
                (start, end), basis = stmt, "statement"
            else:
                row = pos[0]
                start = index.starts[row] if row < len(index.starts) else n
                end = start + len(index.lines[row]) if row < len(index.lines) else n
                basis = "line"
    on_name_line = scope_def is not None and pos is not None and pos[0] == scope_def.name_range[0][0]
    names = _line_names(doc, pos, basis, levers) if scope != "lens" else []
    if names and on_name_line and scope_def.kind == "class":
        names += _constructor_settings(doc, scope_def)
    focus = tuple(terms_text(names).split())  # the terms of the cursor's own line
    text, groups = _near_aliases(_text(doc, start, end, text_start, scope_def if basis == "definition" else None),
                                 focus, word, names, levers)
    if focus and on_name_line:  # the definition's own words of what it does join its signature's
        focus = tuple(dict.fromkeys((*focus, *terms_text(_description(doc, scope_def, text_start)).split())))
    owner = _class_of(doc, scope_def)
    cls = owner if levers.class_bag and basis == "definition" else None
    arch = _bag(doc, start, end, whole=basis == "file", cls=cls)
    settings = _line_settings(doc, pos, levers)
    if on_name_line and scope_def.kind != "class" and word == scope_def.name:
        # lever `knob`: the cursor on a function's own name asks about the function, not about the
        # defaults of its signature (`def postprocess(…, focal_loss=False)` put every focal-loss run
        # first) — but for those sharing a word with its name (`ddim_sample_loop`'s `sample_steps=50`);
        # on one of the defaults, that one is asked (docs/benchmarks.md § Quality, tries 109, 115)
        named = set(tokenize(word))
        settings = tuple(s for s in settings if named.intersection(tokenize(s[0])))
    knob = word.lower() if levers.knob and word else ""
    reads = config_reads(doc, pos, {k for k, _, _ in settings} | {knob}, owner) \
        if levers.knob and scope != "lens" else ()
    whole = body_reads(doc, scope_def, {knob, *reads}) \
        if levers.knob and scope != "lens" and on_name_line and scope_def.kind != "class" else ()
    others = _other_definitions(doc, scope_def) if levers.hubs and scope == "find" and basis == "definition" else ()
    return BuiltQuery(text, arch, scope_def, word, basis,
                      (index.position(start), index.position(end)), doc.lang, word_range, _ask(text, word),
                      hints=Hints(focus, settings, groups, tuple(tokenize(word)) if word else (),
                                  in_body=bool(focus) and scope_def is not None and not on_name_line,
                                  knob=knob, reads=reads, body_reads=whole, others=others,
                                  on_name=on_name_line and word == scope_def.name))


__all__ = [
    "BuiltQuery", "Definition", "build_query", "definitions", "architecture_bag",
    "find_definition", "encloses", "related", "innermost", "language_for_path", "LineIndex",
    "utf16_len", "utf16_to_index", "index_to_utf16",
    "split_lines", "retrieval_query", "Levers", "ALL_ON", "Hints", "NO_HINTS", "line_knobs", "HUB_DEFINITIONS",
]
