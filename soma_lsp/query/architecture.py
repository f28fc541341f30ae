"""Component bags in the record vocabulary (docs/spec.md §3.3 "Architecture").

Python: the layer/module classes *instantiated* — every call ``X(...)`` whose callee resolves,
through the file's imports (or conventional aliases when there are none: ``nn`` → torch.nn,
``hk`` → haiku, ``eqx`` → equinox, ``layers`` → keras.layers, ``tf`` → tensorflow, ``nnx`` →
flax.nnx), to a CapWords name directly inside a layer namespace (torch.nn, flax.linen, flax.nnx,
haiku, haiku.nets, equinox.nn, keras.layers, timm.layers, torch_geometric.nn, …), or to one of
the file's own module classes (a class whose base is a Module-like — ``nn.Module``, ``eqx.Module``,
``hk.Module``, ``keras.layers.Layer``, ``keras.Model``, a layer class such as ``nn.Linear``, or
another own module class). Each call counts once; the key is the class name as written
(``Linear``, ``RMSNorm``) — retrieval canonicalises. Not counted: ``nn.functional.*``, initialisers,
``Module``/``Layer`` themselves, parameters and containers (``Sequential``, ``ModuleList``,
``ModuleDict``, ``Parameter*``) — they say nothing about the architecture.

Calls are found by a regex over the comment- and string-masked text rather than tree-sitter call
nodes, so ``nn.Linear(d, d`` with its closing parenthesis not yet typed still counts.

Config files (YAML/JSON/TOML): see :func:`config_bag`.
"""

from __future__ import annotations

import json
import math
import re
import textwrap

LAYER_NAMESPACES = frozenset({
    "torch.nn", "flax.linen", "flax.nnx", "haiku", "haiku.nets", "equinox.nn", "keras.layers",
    "timm.layers", "timm.models.layers", "torch_geometric.nn", "transformer_engine.pytorch",
    "apex.normalization", "mamba_ssm", "mamba_ssm.modules", "xformers.components",
})
MODULE_BASES = frozenset({
    "torch.nn.Module", "flax.linen.Module", "flax.nnx.Module", "haiku.Module", "equinox.Module",
    "keras.layers.Layer", "keras.Layer", "keras.Model", "keras.models.Model", "Module", "Layer",
})
NOT_COMPONENTS = frozenset({
    "Module", "Layer", "Model", "Parameter", "ParameterList", "ParameterDict", "ModuleList",
    "ModuleDict", "Sequential", "Input", "InputLayer", "InputSpec", "Buffer", "UninitializedParameter",
    "DataParallel", "DistributedDataParallel", "Rngs", "Param", "Variable", "BatchStat", "State", "Optimizer", "Cache", "Intermediate",
})
DEFAULT_ALIASES = {
    "nn": "torch.nn", "torch": "torch", "hk": "haiku", "haiku": "haiku", "eqx": "equinox",
    "equinox": "equinox", "layers": "keras.layers", "keras": "keras", "tf": "tensorflow",
    "nnx": "flax.nnx", "linen": "flax.linen", "te": "transformer_engine.pytorch",
}

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n;]+)", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)?|[^\n;]+)", re.M)
_CLASS = re.compile(r"^[ \t]*class[ \t]+([^\W\d]\w*)[ \t]*\(([^)]*)\)", re.M)
_CAP_CALL = re.compile(r"(?<!\w)([^\W\d_a-z]\w*)[ \t]*\(")
_DOT_OR_WORD = frozenset(".)]_")


def _dotted_start(text: str, i: int) -> int:
    """Start of the dotted name ending at ``i`` (``torch . nn.`` before ``Linear``)."""
    while True:
        j = i - 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        if j < 0 or text[j] != ".":
            return i
        j -= 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        k = j
        while k >= 0 and (text[k].isalnum() or text[k] == "_"):
            k -= 1
        if k == j or text[k + 1].isdigit():
            return i  # `).X(` or `1.X(`: no name before the dot
        i = k + 1
_SPACE = re.compile(r"\s+")
_DEF_BEFORE = re.compile(r"(?:^|\W)(?:def|class)[ \t]+$")


def _normalise(name: str) -> str:
    for old, new in (("tensorflow.python.keras.", "keras."), ("tensorflow.keras.", "keras."),
                     ("tf_keras.", "keras."), ("keras.src.", "keras."), ("torch.nn.modules.", "torch.nn.")):
        if name.startswith(old):
            name = new + name[len(old):]
    if name.startswith("torch.nn.") and name.count(".") > 2:  # torch.nn.modules.linear.Linear
        name = "torch.nn." + name.rsplit(".", 1)[1] if name.split(".")[2] not in (
            "functional", "init", "utils", "parameter", "attention", "parallel") else name
    return name


def python_aliases(masked: str) -> dict[str, str]:
    """Local name → fully qualified name, from the file's import statements."""
    aliases: dict[str, str] = {}
    for m in _IMPORT.finditer(masked):
        for part in m.group(1).split(","):
            bits = part.split()
            if not bits or not re.fullmatch(r"[\w.]+", bits[0]):
                continue
            if len(bits) >= 3 and bits[1] == "as":
                aliases[bits[2]] = bits[0]
            else:
                head = bits[0].split(".")[0]
                aliases[head] = head
    for m in _FROM.finditer(masked):
        module = m.group(1)
        if module.startswith("."):
            continue
        for part in m.group(2).strip("()").replace("\\", " ").split(","):
            bits = part.split()
            if not bits or bits[0] == "*" or not re.fullmatch(r"\w+", bits[0]):
                continue
            local = bits[2] if len(bits) >= 3 and bits[1] == "as" else bits[0]
            aliases[local] = f"{module}.{bits[0]}"
    return aliases


def _resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    base = aliases.get(head) or DEFAULT_ALIASES.get(head) or head
    return _normalise(f"{base}.{rest}" if rest else base)


def _layer_class(full: str) -> str | None:
    prefix, _, last = full.rpartition(".")
    if prefix in LAYER_NAMESPACES and last[:1].isupper() and last not in NOT_COMPONENTS:
        return last
    return None


class PythonArchitecture:
    """Import aliases and own module classes of one Python file, to count instantiations."""

    def __init__(self, masked: str):
        self.aliases = python_aliases(masked)
        bases: dict[str, list[str]] = {}
        for m in _CLASS.finditer(masked):
            args = [a.strip() for a in m.group(2).split(",")]
            bases.setdefault(m.group(1), []).extend(
                re.sub(r"\s+|\[.*", "", a) for a in args if a and "=" not in a)
        own: set[str] = set()
        changed = True
        while changed:  # fixpoint: a subclass of an own module class is one too
            changed = False
            for cls, bs in bases.items():
                if cls in own:
                    continue
                for b in bs:
                    full = _resolve(b, self.aliases) if b else ""
                    if (b in own or full in MODULE_BASES or b in ("Module", "Layer")
                            or _layer_class(full)):
                        own.add(cls)
                        changed = True
                        break
        self.own = frozenset(own)

    def component(self, dotted: str) -> str | None:
        """Component name for a called name (``nn.Linear`` → ``Linear``), or None."""
        if "." not in dotted and dotted in self.own:
            return dotted
        return _layer_class(_resolve(dotted, self.aliases))

    def calls(self, masked: str) -> list[tuple[int, str]]:
        """(offset, component) of every counted instantiation in the file, in order.

        Layer and module classes are CapWords, so the search starts at a capitalised name followed
        by ``(`` (rare in code, hence fast) and walks back over ``a.b.`` to the dotted callee."""
        out: list[tuple[int, str]] = []
        memo: dict[str, str | None] = {}
        for m in _CAP_CALL.finditer(masked):
            s = _dotted_start(masked, m.start())
            if s > 0 and masked[s - 1] in _DOT_OR_WORD:
                continue  # foo().Linear(…), x[0].Dense(…): not a name we can resolve
            if _DEF_BEFORE.search(masked, max(0, s - 12), s):
                continue
            dotted = masked[s:m.end(1)]
            if dotted not in memo:
                memo[dotted] = self.component(_SPACE.sub("", dotted))
            name = memo[dotted]
            if name:
                out.append((s, name))
        return out


def bag_of(calls: list[tuple[int, str]], start: int = 0, end: int | None = None) -> dict[str, float]:
    """Counts of the calls whose offset lies in [start, end)."""
    out: dict[str, float] = {}
    for off, name in calls:
        if off >= start and (end is None or off < end):
            out[name] = out.get(name, 0.0) + 1.0
    return out


# ------------------------------------------------------------------------------------------------
# config files

COMPONENT_KEYS = frozenset({"architecture", "architectures", "arch", "model", "model_type",
                            "components", "layers", "blocks", "modules"})
BAG_KEYS = frozenset({"architecture", "architectures", "arch", "components"})
NAME_KEYS = ("type", "name", "class", "_target_", "class_name", "cls", "layer", "module", "kind")
_SKIP_KEYS = frozenset({"dtype", "device", "path", "checkpoint", "ckpt", "file", "dir", "url",
                        "init", "seed", "precision", "id", "version"})
_COMPONENT = re.compile(r"[A-Za-z_][\w.\-]*\Z")


def _key(k) -> str:
    return str(k).strip().lower().replace("-", "_")


def _is_count(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


_FILE_NAME = re.compile(r"\.(pt|pth|bin|ckpt|safetensors|onnx|h5|hdf5|pkl|npz|npy|json|ya?ml|toml|txt|py|tar|gz|zip)\Z", re.I)


def _add(out: dict[str, float], name, count: float = 1.0) -> None:
    if (isinstance(name, str) and "/" not in name and _COMPONENT.match(name.strip())
            and not _FILE_NAME.search(name.strip())):
        name = name.strip()
        out[name] = out.get(name, 0.0) + float(count)


def _interpret(value, out: dict[str, float], bag: bool, depth: int = 0) -> None:
    """Components named by the value of a component key."""
    if depth > 20:
        return
    if isinstance(value, str):
        _add(out, value)
    elif isinstance(value, list):
        for item in value:
            _interpret(item, out, bag, depth + 1)
    elif isinstance(value, dict):
        named = next((value[k] for k in value if _key(k) in NAME_KEYS and isinstance(value[k], str)), None)
        if named is not None:
            _add(out, named)
        for k, v in value.items():
            kk = _key(k)
            if kk in NAME_KEYS and isinstance(v, str) or kk in _SKIP_KEYS:
                continue
            if bag and named is None and _is_count(v):
                _add(out, str(k), v)  # architecture: {RMSNorm: 2}
            elif bag and named is None and isinstance(v, dict) and not any(
                    _key(x) in NAME_KEYS for x in v):
                _add(out, str(k))  # architecture: {RMSNorm: {eps: 1e-6}}
                _interpret(v, out, False, depth + 1)
            elif isinstance(v, (str, list, dict)):
                _interpret(v, out, kk in BAG_KEYS or (bag and isinstance(v, list)), depth + 1)


def components_of(data, out: dict[str, float] | None = None, depth: int = 0) -> dict[str, float]:
    """Walk parsed config data; interpret the value of every component key at any depth."""
    out = {} if out is None else out
    if depth > 50:
        return out
    if isinstance(data, dict):
        for k, v in data.items():
            kk = _key(k)
            if kk in COMPONENT_KEYS:
                _interpret(v, out, kk in BAG_KEYS)
            elif isinstance(v, (dict, list)):
                components_of(v, out, depth + 1)
    elif isinstance(data, list):
        for item in data:
            components_of(item, out, depth + 1)
    return out


def _load_yaml(text: str):
    import yaml

    return list(yaml.safe_load_all(text))


def _load_toml(text: str):
    import tomllib

    return tomllib.loads(text)


def _error_line(err: Exception) -> int | None:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    if mark is not None:
        return mark.line
    if getattr(err, "lineno", None):
        return err.lineno - 1
    m = re.search(r"line (\d+)", str(err))
    return int(m.group(1)) - 1 if m else None


def _parse_prefix(text: str, loader):
    """Parse ``text``; on an error, retry on the lines before it (a few times) — a file being
    edited is usually fine up to the line being typed."""
    for _ in range(4):
        try:
            return loader(text)
        except RecursionError:
            return None
        except Exception as err:  # noqa: BLE001 — any parse error
            line = _error_line(err)
            lines = text.split("\n")
            if line is None or line <= 0 or line >= len(lines) + 1:
                return None
            text = "\n".join(lines[:line])
    return None


_JSON_KEY = re.compile(r'"(architecture|architectures|arch|model|model_type|components|layers|blocks|modules)"\s*:\s*', re.I)


_NOT_BRACKET = re.compile(r"[^\[\](){}]+")
MAX_NESTING = 400


def too_deep(source: str, limit: int = MAX_NESTING) -> bool:
    """Whether brackets nest deeper than ``limit``. tree-sitter's query cursor takes time
    proportional to nodes × depth (a second for 30,000 nested brackets), and PyYAML is quadratic
    on deep flow collections; no real source nests this deep, so such text gets the regex path."""
    if "(((" not in source and "[[[" not in source and "{{{" not in source and len(source) < 20_000:
        return False
    brackets = _NOT_BRACKET.sub("", source)
    if len(brackets) <= limit:
        return False
    depth = 0
    for c in brackets:
        if c in "([{":
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False


def config_bag(source: str, lang: str) -> dict[str, float]:
    """Components named in a YAML/JSON/TOML file under the keys ``architecture``,
    ``architectures``, ``arch``, ``model``, ``model_type``, ``components``, ``layers``,
    ``blocks``, ``modules`` (case-insensitive, at any depth). Their values:

    * a string → that component (``model: transformer``); paths and file names (``/``,
      ``model.pt``) are skipped;
    * a list → each item (strings, or maps as below);
    * a map with a ``type``/``name``/``class``/``_target_``/``layer``/``module``/``kind`` string
      → that component, and its nested maps are searched too;
    * a bag key nested under another (``model: {d_model: 768, architecture: {RMSNorm: 25}}``)
      is read as a bag;
    * other maps: under the bag keys (``architecture``, ``arch``, ``components``) a name → count
      map gives counts (``{RMSNorm: 2}``) and a name → settings map names its keys; under the
      others (``model``) keys are roles and only string values and nested specs count
      (``model: {norm: rmsnorm, dim: 512}`` → rmsnorm; numbers are hyperparameters).

    A file that does not parse gives what its lines up to the error give (an empty bag at worst).
    """
    if too_deep(source, 100):
        return {}
    if lang == "json":
        try:
            data = json.loads(source)
        except (ValueError, RecursionError):
            data = _json_fragments(source)
    elif lang == "toml":
        data = _parse_prefix(source, _load_toml)
    else:
        data = _parse_prefix(source, _load_yaml)
    try:
        return components_of(data)
    except RecursionError:
        return {}


def _json_fragments(source: str) -> dict:
    """Broken JSON: decode the value after each component key on its own."""
    dec = json.JSONDecoder()
    data: dict = {}
    covered = 0
    for m in _JSON_KEY.finditer(source):
        if m.start() < covered:
            continue  # inside a value already decoded
        try:
            value, covered = dec.raw_decode(source, m.end())
        except (ValueError, RecursionError):
            continue
        data.setdefault("_", []).append({m.group(1): value})
    return data


def config_selection_bag(text: str, lang: str) -> dict[str, float]:
    """Bag of a selected piece of a config file (dedented; empty when it does not parse)."""
    return config_bag(textwrap.dedent(text), lang)
