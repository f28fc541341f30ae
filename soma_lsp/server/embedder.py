"""The Embedder seam made real (docs/spec.md §2.7, issue 20): an optional re-ranking signal, off by default.

soma-lsp ships no embedding model and needs none. A user who has one names it in the settings:

* `soma.embedder.url` — an HTTP service speaking the common `/v1/embeddings` shape (POST
  `{"input": [texts], "model": M}` → `{"data": [{"index": i, "embedding": [floats]}, …]}`): a URL
  ending in `/embeddings` is used as it is, any other gets `/v1/embeddings` appended;
  `soma.embedder.model` is the `model` sent (omitted when empty);
* `soma.embedder.entryPoint` — a Python object `module:attribute`, importable by the server's
  interpreter: an object with `embed(texts) → vectors` (the `Embedder` protocol), or a callable
  taking no argument that returns one. `soma_lsp.server.embedder:wordllama` is the one this package
  carries: WordLlama's small static model that ships inside the `wordllama` package (the `embed`
  extra: `pip install 'soma-lsp[embed]'`); without it installed, the server says so.

What is embedded is `embedding_text(record)` (name, headline, notes, details) and the query's text.
The similarity enters only the server's order of a gated ranking (`related.find_related`): a record's
standing gains `soma.embedder.weight` × the cosine of its vector and the query's. It never lets a
record through the gate, never moves the ties or the tiers, and never changes the core's ranking
(docs/spec.md §2). It is off by default: on the judged set of bench/quality it lowered the scores
(docs/benchmarks.md § Quality), so it is there for pools whose wording it fits, to be measured there.

Record vectors are cached by record id and text (`MAX_CACHED` of them); a failing embedder is
reported once per distinct error (`problems`) and the order stays the plain one.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import threading
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..retrieval import Embedder, ScoredRecord, embedding_text

#: Seconds an embedding request may take before the order goes on without it.
TIMEOUT = 10.0
#: Bytes of one `/v1/embeddings` answer read at most (a few hundred vectors of a few thousand floats).
MAX_ANSWER = 64 << 20
#: Record vectors kept (by id and text): one pool's worth of the records find-related is asked about.
MAX_CACHED = 50_000

log = logging.getLogger("soma_lsp.server")

Similarity = Callable[[Sequence[ScoredRecord]], Mapping[str, float]]


class EmbedderError(RuntimeError):
    """The embedder named in the settings cannot be used; the message says why and what to do."""


class HttpEmbedder:
    """An `Embedder` over HTTP: the common `/v1/embeddings` protocol."""

    def __init__(self, url: str, model: str = "", timeout: float = TIMEOUT) -> None:
        url = url.strip().rstrip("/")
        self.url = url if url.endswith("/embeddings") else f"{url}/v1/embeddings"
        self.model, self.timeout = model, timeout

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        body = {"input": list(texts), **({"model": self.model} if self.model else {})}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read(MAX_ANSWER + 1)
        except (urllib.error.URLError, OSError) as error:
            raise EmbedderError(f"{self.url}: {getattr(error, 'reason', error)}") from None
        if len(raw) > MAX_ANSWER:
            raise EmbedderError(f"{self.url}: answer larger than {MAX_ANSWER >> 20} MiB")
        try:
            data = sorted(json.loads(raw)["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as error:
            raise EmbedderError(f"{self.url}: not a /v1/embeddings answer ({error})") from None
        if len(vectors) != len(texts):
            raise EmbedderError(f"{self.url}: {len(vectors)} vectors for {len(texts)} texts")
        return vectors


class _WordLlama:
    def __init__(self, model) -> None:
        self.model = model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.model.embed(list(texts), norm=True).tolist()


def wordllama() -> Embedder:
    """WordLlama's default model, read from the files its package ships (never downloaded): the
    `soma.embedder.entryPoint` `soma_lsp.server.embedder:wordllama`. (wordllama 0.4 looks for its
    tokenizer in a folder its wheel does not have, so its package folder is given as the cache.)"""
    try:
        import wordllama as package
        from wordllama import WordLlama
    except ImportError:
        raise EmbedderError("wordllama is not installed: install soma-lsp's `embed` extra "
                            "(pip install 'soma-lsp[embed]') in the server's environment") from None
    try:
        model = WordLlama.load(cache_dir=Path(package.__file__).parent, disable_download=True)
    except (OSError, ValueError) as error:
        raise EmbedderError(f"wordllama could not load its model: {error}") from None
    return _WordLlama(model)


def load_entry_point(spec: str) -> Embedder:
    """The object `module:attribute` names: an Embedder, or a class or callable returning one."""
    module_name, sep, attribute = spec.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise EmbedderError(f"entry point {spec!r}: expected module:attribute")
    try:
        target = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise EmbedderError(f"entry point {spec!r}: {error}") from None
    if isinstance(target, type) or (not hasattr(target, "embed") and callable(target)):
        try:
            target = target()
        except EmbedderError:
            raise
        except Exception as error:  # a user's factory: whatever it raises is reported, never fatal
            raise EmbedderError(f"entry point {spec!r}: {type(error).__name__}: {error}") from None
    if not callable(getattr(target, "embed", None)):
        raise EmbedderError(f"entry point {spec!r}: neither an embedder (no embed method) nor a callable returning one")
    return target


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class Reranker:
    """One configured embedder, its record vectors cached, and the problems it ran into."""

    def __init__(self, embedder: Embedder, weight: float) -> None:
        self.embedder, self.weight = embedder, weight
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.problems: list[str] = []

    def similarity(self, text: str) -> Similarity:
        """A function giving `weight` × cosine(query, record) for the records of a gated ranking."""
        def bonus(ranked: Sequence[ScoredRecord]) -> dict[str, float]:
            if not ranked or not text.strip():
                return {}
            try:
                query, *records = self._embed([text], ranked)
            except EmbedderError as error:
                self._report(str(error))
                return {}
            return {s.record.id: self.weight * cosine(query, v) for s, v in zip(ranked, records)}
        return bonus

    def _embed(self, texts: list[str], ranked: Sequence[ScoredRecord]) -> list[list[float]]:
        """The texts' vectors, then the records' (cached ones not asked again)."""
        keys = [(s.record.id, embedding_text(s.record)) for s in ranked]
        with self._lock:
            known = {k: self._vectors[k] for k in keys if k in self._vectors}
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        vectors = _checked(self.embedder.embed(texts + [k[1] for k in missing]), len(texts) + len(missing))
        known.update(zip(missing, vectors[len(texts):]))
        with self._lock:
            for key in missing:
                self._vectors[key] = known[key]
            while len(self._vectors) > MAX_CACHED:
                self._vectors.popitem(last=False)
        return vectors[:len(texts)] + [known[k] for k in keys]

    def _report(self, problem: str) -> None:
        """Logged once per distinct problem (the server's log reaches the client's output)."""
        if problem not in self.problems:
            self.problems.append(problem)
            log.warning("soma.embedder: %s; find-related keeps its plain order", problem)


def _checked(vectors, count: int) -> list[list[float]]:
    try:
        out = [[float(x) for x in v] for v in vectors]
    except (TypeError, ValueError) as error:
        raise EmbedderError(f"the embedder returned no vectors ({error})") from None
    if len(out) != count:
        raise EmbedderError(f"the embedder returned {len(out)} vectors for {count} texts")
    return out


_current: tuple[tuple, Reranker | None] | None = None
_current_lock = threading.Lock()


def reranker(url: str, model: str, entry_point: str, weight: float) -> Reranker | None:
    """The Reranker the settings name (None: no embedder, the default), built once per setting."""
    global _current
    key = (url, model, entry_point, weight)
    with _current_lock:
        if _current is not None and _current[0] == key:
            return _current[1]
    if not url and not entry_point:
        found = None
    else:
        try:
            found = Reranker(HttpEmbedder(url, model) if url else load_entry_point(entry_point), weight)
        except EmbedderError as error:
            found = Reranker(_Broken(str(error)), weight)
    with _current_lock:
        _current = (key, found)
    return found


def similarity_for(settings, text: str) -> Similarity | None:
    """The similarity signal for a query's text under these `Settings` (None: no embedder named)."""
    found = reranker(settings.embedder_url, settings.embedder_model, settings.embedder_entry_point,
                     settings.embedder_weight)
    return found.similarity(text) if found is not None else None


class _Broken:
    """An embedder that could not be built: every use reports why (the order stays the plain one)."""

    def __init__(self, why: str) -> None:
        self.why = why

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbedderError(self.why)


__all__ = ["EmbedderError", "HttpEmbedder", "Reranker", "Similarity", "cosine", "load_entry_point",
           "reranker", "similarity_for", "wordllama"]
