"""Words of a scope: code identifiers minus noise, and comment/docstring words minus stop words.

Why two lists: an identifier named ``range`` or ``max`` is boilerplate, but "max lr" or "range
test" in a comment is what a researcher wrote about the experiment. So code noise (keywords,
``self``/``cls``/``None``, builtins, typing names) applies to identifiers, English stop words apply
to prose. Both drop one-character words and dunders (``__init__`` is in every class).

The relevance gate lets a record through on any lexical match, so words that match everything
("the", "self", "int") must not reach the query at all.

Code noise, per language (unknown languages: the union):
* Python — every keyword and soft keyword; every name in ``builtins`` (``int``, ``len``,
  ``range``, ``print``, ``super``, ``isinstance``, exception classes…); ``self``, ``cls``,
  ``args``, ``kwargs``; typing names (``Optional``, ``List``, ``Any``, ``Callable``…); decorator
  boilerplate (``dataclass``, ``property``, ``staticmethod``…); module aliases found in every file
  of their kind (``nn``, ``np``, ``jnp``, ``os``, ``sys``, ``re``, ``math``…). ``torch``, ``jax``,
  ``Module`` and ``forward`` are kept: they say which framework and which method.
* C/C++/CUDA, Rust, Go, JS/TS, Julia, shell — keywords, primitive types, ``this``/``self``/``nil``,
  the standard containers and printing (``std``, ``Vec``, ``console``, ``fmt``, ``echo``…).
* Everywhere — one-character names (``x``, ``i``, ``q``), dunders (``__init__``), ``_``.
Prose: a list of English stop words plus docstring boilerplate (``returns``, ``param``, ``args``,
``shape``) and URL parts (``http``, ``www``, ``com``); pure numbers go, ``500k`` and ``fp32`` stay.
"""

from __future__ import annotations

import builtins as _builtins
import keyword as _keyword
import re

# Identifiers: start at a word boundary with a letter or underscore, so the "e" of 1e-4 is no word.
IDENT_RE = re.compile(r"(?<!\w)[^\W\d]\w*")
# Prose words: any run of word characters; tokenize() splits them further later.
WORD_RE = re.compile(r"\w+")

_PYTHON_BUILTINS = {n for n in dir(_builtins) if not n.startswith("_")}
_PYTHON = (
    set(_keyword.kwlist) | set(getattr(_keyword, "softkwlist", ())) | _PYTHON_BUILTINS
    | {"self", "cls", "args", "kwargs", "typing", "Optional", "Union", "Any", "List", "Dict",
       "Tuple", "Set", "FrozenSet", "Type", "Callable", "Iterable", "Iterator", "Sequence",
       "Mapping", "MutableMapping", "TypeVar", "Generic", "Protocol", "Literal", "ClassVar",
       "Final", "Annotated", "Self", "annotations", "__future__", "dataclass", "dataclasses",
       "field", "staticmethod", "classmethod", "property", "abstractmethod", "overload",
       # module aliases present in every file of their kind: they would match any record
       "nn", "np", "jnp", "os", "sys", "re", "json", "logging", "functools", "itertools",
       "collections", "math", "Path", "pathlib"}
)
_C_LIKE = {
    "auto", "bool", "break", "case", "catch", "char", "class", "const", "constexpr", "continue",
    "default", "delete", "do", "double", "else", "enum", "explicit", "extern", "false", "float",
    "for", "friend", "goto", "if", "inline", "int", "long", "namespace", "new", "nullptr",
    "operator", "private", "protected", "public", "register", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef",
    "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while", "std",
    "size_t", "int64_t", "int32_t", "uint8_t", "uint32_t", "uint64_t", "include", "define",
    "ifdef", "ifndef", "endif", "pragma", "__global__", "__device__", "__host__", "__shared__",
    "override", "noexcept", "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast",
    "decltype", "string", "vector", "NULL",
}
_RUST = {
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
    "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true",
    "type", "unsafe", "use", "where", "while", "Some", "None", "Ok", "Err", "Option", "Result",
    "Vec", "String", "Box", "usize", "isize", "u8", "u16", "u32", "u64", "i8", "i16", "i32",
    "i64", "f32", "f64", "str", "unwrap", "println", "clone", "into", "iter",
}
_GO = {
    "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough",
    "for", "func", "go", "goto", "if", "import", "interface", "map", "package", "range",
    "return", "select", "struct", "switch", "type", "var", "nil", "true", "false", "err",
    "error", "string", "int", "int64", "float64", "float32", "bool", "byte", "len", "make",
    "append", "fmt", "Println", "Printf", "Errorf",
}
_JS = {
    "async", "await", "break", "case", "catch", "class", "const", "continue", "debugger",
    "default", "delete", "do", "else", "export", "extends", "false", "finally", "for",
    "function", "if", "import", "in", "instanceof", "let", "new", "null", "return", "super",
    "switch", "this", "throw", "true", "try", "typeof", "undefined", "var", "void", "while",
    "with", "yield", "from", "of", "console", "log", "require", "module", "exports", "string",
    "number", "boolean", "any", "unknown", "never", "interface", "type", "implements",
    "readonly", "private", "public", "protected", "static", "enum", "declare", "as", "Promise",
    "Array", "Object", "JSON", "Math",
}
_JULIA = {
    "abstract", "baremodule", "begin", "break", "catch", "const", "continue", "do", "else",
    "elseif", "end", "export", "false", "finally", "for", "function", "global", "if", "import",
    "let", "local", "macro", "module", "mutable", "primitive", "quote", "return", "struct",
    "true", "try", "type", "using", "while", "where", "nothing", "Int", "Int64", "Float32",
    "Float64", "String", "Bool", "Vector", "Array", "println", "length", "in", "isa",
}
_BASH = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "select", "time", "echo", "printf", "export", "local", "set", "unset",
    "readonly", "declare", "return", "exit", "source", "shift", "cd", "true", "false", "test",
    "eval", "exec", "trap", "env", "bin", "usr", "bash", "sh", "dev", "null", "then",
}
_CONFIG = {"true", "false", "null", "none", "yes", "no", "on", "off", "True", "False", "None"}

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each else etc every
    few for from further had has have having he her here hers herself him himself his how however
    i if in into is it its itself just me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up upon
    us very was we were what when where which while who whom why will with would you your yours
    yourself yourselves e.g eg i.e ie via vs todo fixme xxx note see http https www com org html
    returns return param params type rtype arg args default optional shape""".split()
)

_BY_LANGUAGE = {
    "python": frozenset(_PYTHON), "cpp": frozenset(_C_LIKE), "rust": frozenset(_RUST),
    "go": frozenset(_GO), "javascript": frozenset(_JS), "typescript": frozenset(_JS),
    "tsx": frozenset(_JS), "julia": frozenset(_JULIA), "bash": frozenset(_BASH),
    "yaml": frozenset(_CONFIG), "json": frozenset(_CONFIG), "toml": frozenset(_CONFIG),
}
_ANY = frozenset(_PYTHON | _C_LIKE | _RUST | _GO | _JS | _JULIA | _BASH | _CONFIG)


def code_noise(lang: str) -> frozenset[str]:
    """Identifiers left out of queries for ``lang`` (case-sensitive: ``None`` but not ``none`` in
    Python). Unknown languages get the union of all lists."""
    return _BY_LANGUAGE.get(lang, _ANY)


def is_noise_identifier(word: str, noise: frozenset[str]) -> bool:
    return (
        len(word) <= 1
        or word in noise
        or (word.startswith("__") and word.endswith("__"))
        or word.strip("_") == ""
    )


_ATTRIBUTE = re.compile(r"\.[ \t]*([^\W\d]\w*)")
_ATTRIBUTE_OK = frozenset(_PYTHON_BUILTINS)


def identifiers(code: str, noise: frozenset[str]) -> list[str]:
    """Identifiers of (already comment- and string-masked) code, noise removed, in order. An
    attribute name is no builtin: ``torch.compile``, ``x.float()`` keep ``compile``/``float``."""
    kept = _ATTRIBUTE_OK.intersection(_ATTRIBUTE.findall(code)) if "." in code else ()
    return [w for w in IDENT_RE.findall(code) if w in kept or not is_noise_identifier(w, noise)]


def prose_words(text: str) -> list[str]:
    """Words of a comment or docstring: stop words, one-character words and pure digits dropped."""
    out = []
    for w in WORD_RE.findall(text):
        w = w.strip("_")
        if len(w) <= 1 or w.isdigit() or w.lower() in STOP_WORDS:
            continue
        out.append(w)
    return out


def word_at(line: str, index: int) -> tuple[int, int] | None:
    """Code-point span of the identifier-like run (letters, digits, ``_``) containing ``index`` in
    ``line``, or ending right before it (cursor just after a word); None when there is none."""
    n = len(line)

    def is_word(i: int) -> bool:
        return 0 <= i < n and (line[i].isalnum() or line[i] == "_")

    if not is_word(index):
        if is_word(index - 1):
            index -= 1
        else:
            return None
    start = index
    while is_word(start - 1):
        start -= 1
    end = index + 1
    while is_word(end):
        end += 1
    return start, end


TERM_NOISE = STOP_WORDS | {"self", "cls"}


def terms_text(words: list[str]) -> str:
    """The distinct retrieval terms of ``words`` (first appearance first), without one-character
    and stop-word terms — the parts of ``is_causal`` or ``q_proj`` that would match any note."""
    from soma_lsp.retrieval.tokenize import tokenize

    seen: dict[str, None] = {}
    for w in dict.fromkeys(words):
        for t in tokenize(w):
            if len(t) > 1 and t not in TERM_NOISE and not t.isdigit():
                seen.setdefault(t, None)
    return " ".join(seen)
