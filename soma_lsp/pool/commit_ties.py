"""Ties from git: a run made at commit C speaks for the definitions C changed.

Most runs carry the commit they ran at (a record's `commit`, MLflow's `mlflow.source.git.commit`,
W&B's `git.commit`) and nobody writes `code:` by hand. So:

1. **What C changed** (`changed_definitions`): C's diff against its first parent, each changed line
   mapped to the innermost named definition containing it in the file *as of C*. A commit's diff
   never changes, so this is computed once per commit and kept (`CommitCache`, in the cache
   directory beside the pool snapshots). Lines outside every definition, and files with no
   definitions (docs, configs), tie nothing: a commit that changed no code ties no code.
2. **Where that code is today** (`follow`): the path through the renames on HEAD's first-parent
   line since C, the definition by its qualified name in today's working tree; its text compared
   with its text as of C says whether it *changed since* — a dead end on code that has changed
   since is weaker evidence, and the hover says so. This part depends on HEAD and the working tree
   and is redone when they move; it reads only the files involved.
3. **Whether the code is to blame** (`attribute`): many runs share one commit (a sweep). A dead end
   is blamed on its commit's code only when no other run at the same commit succeeded; otherwise
   the failure lies in what differs between the runs (`SweepEvidence.differs`, from the runs'
   `key=value` settings), the tie is shown with that evidence and does not warn.

Records whose commit this repository does not have (another repository by `repo` URL, a shallow
clone, a typo) get no ties; `CommitTieMap.skipped` says why, for one log line. Runs without git or
outside a repository: `GitRepo.find` says why, and there are no commit ties at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..knobs import Knob
from ..query import definitions as parsed_definitions
from ..query.definitions import Definition, scan_python_definitions
from ..query.languages import CONFIG_LANGUAGES, grammar, language_for_path
from ..query.positions import LineIndex
from .gitrepo import GitRepo, normalise_url, parse_patch

_CACHE_VERSION = 1
_MAX_DIFFERS = 3  # settings named in a sweep's evidence


@dataclass(frozen=True, slots=True)
class ChangedDefinition:
    """A definition a commit changed: where it was then, and a digest of its text then."""

    path: str
    qualname: str
    digest: str


@dataclass(frozen=True, slots=True)
class CommitRun:
    """What tying needs of a record: its commit, its repository, its outcome and its settings."""

    id: str
    commit: str
    repo: str | None = None
    dead_end: bool = False
    succeeded: bool = False
    settings: Mapping[str, Knob] = field(default_factory=dict, compare=False)
    patch: bytes | None = field(default=None, compare=False)  # uncommitted changes it ran with (W&B diff.patch)


@dataclass(frozen=True, slots=True)
class _Code:
    """The code a run ran: a commit, and the uncommitted patch on top of it if any. `key` names it
    in the cache: the sha, or sha+digest of the patch."""

    sha: str
    patch: bytes | None = None

    @property
    def key(self) -> str:
        if not self.patch:
            return self.sha
        return f"{self.sha}+{hashlib.blake2b(self.patch, digest_size=8).hexdigest()}"


@dataclass(frozen=True, slots=True)
class SweepEvidence:
    """Other runs at the same commit succeeded: `succeeded` of them; this run differs in `differs`."""

    succeeded: int
    differs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommitTie:
    """A record tied to a definition of today's working tree through the commit it ran at."""

    record_id: str
    path: str  # absolute, today's
    qualname: str
    commit: str
    commits_ago: int | None  # None: C is not an ancestor of HEAD
    changed_since: bool
    sweep: SweepEvidence | None = None

    @property
    def blames_code(self) -> bool:
        """Whether a dead end here may warn on the code (no run at the same commit succeeded)."""
        return self.sweep is None


@dataclass(frozen=True)
class CommitTieMap:
    """Commit ties by today's absolute path; `skipped` says per record why it has none."""

    by_path: Mapping[str, tuple[CommitTie, ...]] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)
    head: str | None = None

    def for_path(self, path: str) -> tuple[CommitTie, ...]:
        return self.by_path.get(path, ())

    def __len__(self) -> int:
        return sum(len(ties) for ties in self.by_path.values())


# -- definitions and their text ------------------------------------------------------------------

def is_code(path: str) -> bool:
    """Whether definitions can be read from this file (a language with a grammar, not a config)."""
    lang = language_for_path(path)
    return lang not in CONFIG_LANGUAGES and (lang == "python" or grammar(lang) is not None)


def code_definitions(source: str, path: str) -> tuple[list[Definition], list[str]]:
    """The file's definitions and lines, by one rule for a file as of C and as it is today, so their
    texts compare. Python by indentation (`scan_python_definitions`: 4× faster than a full parse and
    tolerant of any state of the code — thousands of file versions are read on a first load);
    other languages through the query builder's grammars."""
    index = LineIndex(source)
    if language_for_path(path) == "python":
        return scan_python_definitions(index), index.lines
    return parsed_definitions(source, path), index.lines


def _digest(lines: Sequence[str], definition: Definition) -> str:
    first, last = definition.range[0][0], definition.range[1][0]
    text = "\n".join(lines[first:last + 1]).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def changed_in(source: str, path: str, changed_lines: Iterable[int]) -> list[ChangedDefinition]:
    """The innermost named definitions of `source` containing any of `changed_lines` (0-based)."""
    defs, lines = code_definitions(source, path)
    hit: dict[str, Definition] = {}
    for line in changed_lines:
        inner = None
        for d in defs:
            if d.range[0][0] <= line <= d.range[1][0] and (inner is None or d.range[0][0] >= inner.range[0][0]):
                inner = d
        if inner is not None:
            hit.setdefault(inner.qualname, inner)
    return [ChangedDefinition(path, q, _digest(lines, d)) for q, d in hit.items()]


# -- 1. what each commit changed (cached by sha) -------------------------------------------------

class CommitCache:
    """sha → the definitions that commit changed, and abbreviated → full shas, kept in one JSON file
    per repository (written atomically). Both are facts of the history: only a rewrite that drops
    commits could make them stale, and then the records naming those commits are the stale ones."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._changes: dict[str, tuple[ChangedDefinition, ...]] = {}
        self.resolved: dict[str, str] = {}
        self.dirty = False
        if path is not None:
            self._read(path)

    def _read(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("version") != _CACHE_VERSION:
                return
            self._changes = {sha: tuple(ChangedDefinition(*entry) for entry in entries)
                             for sha, entries in data["commits"].items()}
            self.resolved = dict(data["resolved"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self._changes, self.resolved = {}, {}  # no cache, or one we cannot read: computed again

    def __contains__(self, sha: str) -> bool:
        return sha in self._changes

    def get(self, sha: str) -> tuple[ChangedDefinition, ...]:
        return self._changes.get(sha, ())

    def put(self, sha: str, changes: Iterable[ChangedDefinition]) -> None:
        self._changes[sha] = tuple(changes)
        self.dirty = True

    def resolve(self, repo: GitRepo, shas: Iterable[str]) -> dict[str, str]:
        """`repo.resolve`, asking git only for the shas not resolved before."""
        shas = {s.lower() for s in shas}
        new = repo.resolve(s for s in shas if s not in self.resolved)
        if new:
            self.resolved.update(new)
            self.dirty = True
        return {s: self.resolved[s] for s in shas if s in self.resolved}

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        data = {"version": _CACHE_VERSION, "resolved": self.resolved,
                "commits": {sha: [[c.path, c.qualname, c.digest] for c in changes]
                            for sha, changes in self._changes.items()}}
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".commits-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.dirty = False


def changed_definitions(repo: GitRepo, codes: Iterable[_Code], cache: CommitCache) -> None:
    """Fill `cache` with what each code changed, for those it does not have: one `git log` for the
    commits' diffs, one `git cat-file` for the files as of each commit. A patch is applied to the
    files as of its commit, and its changed lines read in the result."""
    missing = {code.key: code for code in codes if code.key not in cache}
    if not missing:
        return
    diffs = repo.first_parent_diffs(code.sha for code in missing.values() if not code.patch)
    changes = {key: parse_patch(code.patch) if code.patch else diffs.get(code.sha, [])
               for key, code in missing.items()}
    wanted = [(code.sha, change.old_path if code.patch else change.new_path)
              for key, code in missing.items() for change in changes[key]
              if change.new_path and is_code(change.new_path) and (change.old_path or not code.patch)]
    texts = repo.blobs(wanted)
    for key, code in missing.items():
        found: list[ChangedDefinition] = []
        for change in changes[key]:
            if not change.new_path or not is_code(change.new_path):
                continue
            if code.patch:
                old = texts.get((code.sha, change.old_path), None) if change.old_path else ""
                text = change.apply(old) if old is not None else None
            else:
                text = texts.get((code.sha, change.new_path))
            if text is not None:
                found.extend(changed_in(text, change.new_path, change.lines))
        cache.put(key, found)


# -- 2. where that code is today -----------------------------------------------------------------

class _Today:
    """HEAD's first-parent line, the renames on it, and today's files, each read once."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.line = {sha: i for i, sha in enumerate(repo.first_parent_line())}
        self._renames: list[tuple[int, str, str]] | None = None
        self._files: dict[str, dict[str, str] | None] = {}

    def commits_ago(self, sha: str) -> int | None:
        if sha in self.line:
            return self.line[sha]
        try:
            self.repo.git("merge-base", "--is-ancestor", sha, "HEAD")
        except Exception:  # noqa: BLE001 - not an ancestor (or unreadable): no age to tell
            return None
        return self.repo.commits_since(sha)

    def path_now(self, path: str, commits_ago: int | None) -> str:
        """`path` as of a commit `commits_ago` commits back, through the renames since, oldest first."""
        if self._renames is None:
            self._renames = [(self.line.get(c, -1), old, new) for c, old, new in self.repo.renames()]
        limit = len(self.line) if commits_ago is None else commits_ago
        for position, old, new in reversed(self._renames):
            if 0 <= position < limit and old == path:
                path = new
        return path

    def digests(self, path: str) -> dict[str, str] | None:
        """qualname → digest of each definition in today's file (None: no such file)."""
        if path not in self._files:
            full = os.path.join(self.repo.root, path)
            try:
                with open(full, encoding="utf-8", errors="replace") as f:
                    source = f.read()
            except OSError:
                self._files[path] = None
            else:
                defs, lines = code_definitions(source, path)
                self._files[path] = {d.qualname: _digest(lines, d) for d in defs}
        return self._files[path]


def follow(today: _Today, runs: Sequence[tuple[CommitRun, _Code]], cache: CommitCache) -> list[CommitTie]:
    """Each (run, its code)'s changed definitions as ties on today's working tree."""
    ties: list[CommitTie] = []
    ages: dict[str, int | None] = {}
    for run, code in runs:
        sha = code.sha
        if sha not in ages:
            ages[sha] = today.commits_ago(sha)
        for changed in cache.get(code.key):
            path = today.path_now(changed.path, ages[sha])
            digests = today.digests(path)
            if digests is None or changed.qualname not in digests:
                continue  # the definition is gone (deleted, or renamed: a name is all we follow)
            ties.append(CommitTie(run.id, os.path.join(today.repo.root, path), changed.qualname, sha, ages[sha],
                                  digests[changed.qualname] != changed.digest))
    return ties


# -- 3. whether the code is to blame --------------------------------------------------------------

def sweep_evidence(run: CommitRun, peers: Sequence[CommitRun]) -> SweepEvidence | None:
    """For a dead end: the runs at the same commit that succeeded, and the settings this one has
    that none of them shares (None when no peer succeeded: the code may be to blame)."""
    succeeded = [p for p in peers if p.succeeded and not p.dead_end and p.id != run.id]
    if not run.dead_end or not succeeded:
        return None
    differs = tuple(f"{key}={knob.text}" for key, knob in sorted(run.settings.items())
                    if all(p.settings.get(key, Knob("", "")).value != knob.value for p in succeeded))
    return SweepEvidence(len(succeeded), differs[:_MAX_DIFFERS])


def attribute(ties: Iterable[CommitTie], runs: Sequence[tuple[CommitRun, _Code]]) -> list[CommitTie]:
    """Each tie with the sweep evidence of its run (see `sweep_evidence`): runs at the same code
    (commit and patch) are its peers."""
    at_code: dict[str, list[CommitRun]] = defaultdict(list)
    for run, code in runs:
        at_code[code.key].append(run)
    evidence = {run.id: sweep_evidence(run, at_code[code.key]) for run, code in runs}
    out = []
    for tie in ties:
        sweep = evidence.get(tie.record_id)
        out.append(tie if sweep is None else CommitTie(tie.record_id, tie.path, tie.qualname, tie.commit,
                                                       tie.commits_ago, tie.changed_since, sweep))
    return out


# -- all of it -------------------------------------------------------------------------------------

def commit_ties(repo: GitRepo, runs: Iterable[CommitRun], cache: CommitCache) -> CommitTieMap:
    """The ties of every run whose commit this repository has (the three steps above)."""
    remotes = repo.remote_urls()
    skipped: dict[str, str] = {}
    eligible = []
    for run in runs:
        if run.repo and remotes and normalise_url(run.repo) not in remotes:
            skipped[run.id] = f"ran in another repository ({run.repo})"
        else:
            eligible.append(run)
    resolved = cache.resolve(repo, (run.commit for run in eligible))
    known: list[tuple[CommitRun, _Code]] = []
    for run in eligible:
        sha = resolved.get(run.commit.lower())
        if sha is None:
            skipped[run.id] = f"commit {run.commit} is not in {repo.root}"
        else:
            known.append((run, _Code(sha, run.patch)))
    changed_definitions(repo, (code for _, code in known), cache)
    today = _Today(repo)
    by_path: dict[str, list[CommitTie]] = defaultdict(list)
    for tie in attribute(follow(today, known, cache), known):
        by_path[tie.path].append(tie)
    head = min(today.line, key=today.line.__getitem__, default=None)
    return CommitTieMap({p: tuple(t) for p, t in by_path.items()}, skipped, head)
