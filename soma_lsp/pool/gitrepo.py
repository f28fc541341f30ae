"""A git repository read through the `git` command line, a few processes for any number of commits.

Why the command line: it is on every machine that has a repository, it is what the user's own
`git` sees (worktrees, alternates, safe.directory), and batched it is fast — one `git log` gives the
first-parent diffs of 2,000 commits, one `git cat-file --batch` gives every file version. pygit2 is
a 16 MB wheel for the same figures (measured in docs/benchmarks.md § Git ties); dulwich re-diffs
every revision in Python.

Everything here only reads: no command that writes (no `fetch`, no index refresh: `--no-optional-locks`).
Every failure is an `GitError` with the command's own message; callers turn it into one log line.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

#: Every git command runs with these: no pager, no colour, no locks taken, paths as they are.
_BASE = ("git", "--no-pager", "--no-optional-locks", "-c", "core.quotePath=false", "-c", "color.ui=never")
_TIMEOUT = 120.0  # seconds for any one command (a history walk over a huge repository included)
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_COMMIT_MARK = b"\x01"  # starts the line `git log --format=%x01%H` writes for each commit


class GitError(Exception):
    """A git command failed or git is not there; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One `@@ -old_start,old_count +new_start,new_count @@` hunk and its body lines (` `, `-`, `+`)."""

    old_start: int
    old_count: int
    new_start: int
    body: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file of a diff: its paths before and after, and its hunks."""

    old_path: str | None  # None: the diff adds the file
    new_path: str | None  # None: the diff deletes it
    hunks: tuple[Hunk, ...] = ()

    @property
    def lines(self) -> tuple[int, ...]:
        """0-based lines of `new_path` that the diff added or changed; where it only deleted lines,
        the line just above the deletion, so that the definition it happened in counts."""
        out: set[int] = set()
        for hunk in self.hunks:
            grows = any(body[:1] in (b" ", b"+") for body in hunk.body)
            line = hunk.new_start - 1 if grows else hunk.new_start  # the next new line's index
            deleted = False  # a run of `-` lines no `+` line replaced (yet)
            for tag in [body[:1] for body in hunk.body] + [b" "]:
                if tag == b"-":
                    deleted = True
                    continue
                if deleted and tag != b"+":
                    out.add(max(0, line - 1))
                deleted = False
                if tag == b"+":
                    out.add(line)
                if tag in (b"+", b" "):
                    line += 1
        return tuple(sorted(out))

    def apply(self, old: str) -> str | None:
        """The new text from the old one (None when the hunks' context does not match it)."""
        old_lines = old.split("\n")
        new_lines: list[str] = []
        cursor = 0
        for hunk in self.hunks:
            start = hunk.old_start - 1 if hunk.old_count else hunk.old_start  # count 0: insert after old_start
            if start < cursor or start > len(old_lines):
                return None
            new_lines.extend(old_lines[cursor:start])
            cursor = start
            for body in hunk.body:
                tag, text = body[:1], body[1:].decode("utf-8", "replace")
                if tag == b"+":
                    new_lines.append(text)
                elif tag in (b" ", b"-"):
                    if cursor >= len(old_lines) or old_lines[cursor] != text:
                        return None
                    if tag == b" ":
                        new_lines.append(text)
                    cursor += 1
        new_lines.extend(old_lines[cursor:])
        return "\n".join(new_lines)


def _unquote(raw: bytes) -> str:
    """A path as git prints it: C-quoted ("a\\tb") when it has special characters, else as is."""
    if raw.startswith(b'"') and raw.endswith(b'"'):
        return raw[1:-1].decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape")


def _diff_path(raw: bytes) -> str | None:
    """The path of a `--- a/x` / `+++ b/x` line (None for /dev/null)."""
    raw = raw.rstrip(b"\n").rstrip(b"\t")
    if raw == b"/dev/null":
        return None
    path = _unquote(raw)
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_patch(text: bytes) -> list[FileChange]:
    """A unified diff as `git diff` writes it (any context; `W&B`'s `diff.patch`) → its files."""
    return parse_log_patch(_COMMIT_MARK + b"patch\n" + text)["patch"]


def parse_log_patch(output: bytes) -> dict[str, list[FileChange]]:
    """`git log --format=%x01%H -p` output → each commit's changed files, with their hunks."""
    result: dict[str, list[FileChange]] = {}
    changes: list[FileChange] | None = None
    old = new = None
    hunks: list[Hunk] = []
    body: list[bytes] = []
    left = [0, 0]  # old and new lines the current hunk still has to come
    in_file = False

    def close() -> None:
        nonlocal in_file
        if in_file and changes is not None:
            changes.append(FileChange(old, new, tuple(hunks)))
        in_file = False

    for line in output.split(b"\n"):
        if left[0] > 0 or left[1] > 0:  # inside a hunk: by count, whatever the line looks like
            line = line or b" "  # a blank context line whose space a mail or an editor took
            tag = line[:1]
            left[0] -= tag in (b" ", b"-")
            left[1] -= tag in (b" ", b"+")
            body.append(line)
            if left[0] <= 0 and left[1] <= 0:
                hunks[-1] = Hunk(hunks[-1].old_start, hunks[-1].old_count, hunks[-1].new_start, tuple(body))
        elif line.startswith(_COMMIT_MARK):
            close()
            changes = result.setdefault(line[1:].decode("ascii").strip(), [])
        elif line.startswith(b"diff --git "):
            close()
            in_file, old, new, hunks = True, None, None, []
        elif not in_file:
            continue
        elif line.startswith(b"@@"):
            m = _HUNK.match(line)
            if m:
                old_start, old_count, new_start, new_count = (int(g) if g is not None else 1 for g in m.groups())
                hunks.append(Hunk(old_start, old_count, new_start, ()))
                body, left[:] = [], [old_count, new_count]
        elif line.startswith(b"rename from "):
            old = _unquote(line[12:])
        elif line.startswith(b"rename to "):
            new = _unquote(line[10:])
        elif line.startswith(b"--- "):
            old = _diff_path(line[4:])
        elif line.startswith(b"+++ "):
            new = _diff_path(line[4:])
    close()
    return result


class GitRepo:
    """The repository holding a folder. `GitRepo.find(folder)` → (repo, None) or (None, reason)."""

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def find(cls, folder: str) -> tuple["GitRepo | None", str | None]:
        try:
            out = _run(("rev-parse", "--show-toplevel", "--is-shallow-repository"), cwd=folder)
        except GitError as error:
            return None, str(error)
        lines = out.decode("utf-8", "surrogateescape").splitlines()
        if len(lines) < 2:
            return None, f"{folder}: git rev-parse gave no work tree"
        return cls(lines[0]), None

    def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        return _run(args, cwd=self.root, stdin=stdin)

    def resolve(self, shas: Iterable[str]) -> dict[str, str]:
        """Full commit ids of the (possibly abbreviated) `shas` this repository has; unknown,
        ambiguous or malformed ones are left out."""
        asked = sorted({s.lower() for s in shas if _SHA.fullmatch(s or "")})
        if not asked:
            return {}
        out = self.git("cat-file", "--batch-check=%(objectname) %(objecttype)",
                       stdin="".join(f"{s}^{{commit}}\n" for s in asked).encode())
        found = {}
        for sha, line in zip(asked, out.decode("ascii", "replace").splitlines()):
            parts = line.split()
            if len(parts) == 2 and parts[1] == "commit" and parts[0].startswith(sha):
                found[sha] = parts[0]
        return found

    def first_parent_diffs(self, commits: Iterable[str]) -> dict[str, list[FileChange]]:
        """Each commit's diff against its first parent (a root commit: against nothing), line-exact
        (`-U0`), renames followed (`-M`). One process for all of them."""
        commits = list(dict.fromkeys(commits))
        if not commits:
            return {}
        out = self.git("log", "--no-walk=unsorted", "--stdin", "--diff-merges=first-parent", "-p", "-U0",
                       "-M", "--no-ext-diff", "--no-textconv", "--format=%x01%H",
                       stdin="".join(c + "\n" for c in commits).encode())
        return parse_log_patch(out)

    def blobs(self, wanted: Iterable[tuple[str, str]], max_bytes: int = 4 << 20) -> dict[tuple[str, str], str]:
        """The text of `path` as of `commit` for each (commit, path); missing, binary or larger
        than `max_bytes` ones are left out. One `git cat-file --batch` for all."""
        wanted = list(dict.fromkeys(wanted))
        if not wanted:
            return {}
        out = self.git("cat-file", "--batch", stdin="".join(f"{c}:{p}\n" for c, p in wanted).encode())
        found: dict[tuple[str, str], str] = {}
        pos = 0
        for key in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) != 3 or header[1] != b"blob":
                continue  # "<name> missing" (or a tree): nothing follows
            size = int(header[2])
            data = out[pos:pos + size]
            pos += size + 1
            if size <= max_bytes and b"\0" not in data[:8000]:
                found[key] = data.decode("utf-8", "replace")
        return found

    def first_parent_line(self) -> list[str]:
        """HEAD's first-parent history, newest first (index = commits since)."""
        return self.git("rev-list", "--first-parent", "HEAD").decode("ascii").split()

    def commits_since(self, commit: str) -> int:
        """How many commits HEAD has that `commit` has not (for commits off the first-parent line)."""
        return int(self.git("rev-list", "--count", f"{commit}..HEAD").strip() or 0)

    def renames(self) -> list[tuple[str, str, str]]:
        """(commit, old path, new path) for every rename on HEAD's first-parent line, newest first."""
        out = self.git("log", "--first-parent", "--diff-merges=first-parent", "-M", "--diff-filter=R",
                       "--name-status", "-z", "--format=%x01%H")
        renames: list[tuple[str, str, str]] = []
        for chunk in out.split(_COMMIT_MARK)[1:]:  # "<sha>\0\nR100\0old\0new\0…"
            head, *fields = [f.strip(b"\n") for f in chunk.split(b"\0")]
            for i in range(0, len(fields) - 2, 3):
                if fields[i].startswith(b"R"):
                    renames.append((head.decode("ascii"), _raw_path(fields[i + 1]), _raw_path(fields[i + 2])))
        return renames

    def remote_urls(self) -> set[str]:
        """The repository's remotes, normalised (see `same_repository`)."""
        try:
            out = self.git("remote", "-v").decode("utf-8", "replace")
        except GitError:
            return set()
        return {normalise_url(line.split()[1]) for line in out.splitlines() if len(line.split()) >= 2}


def _raw_path(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def normalise_url(url: str) -> str:
    """`git@github.com:org/repo.git`, `https://user@github.com/org/repo` and `ssh://…` → `github.com/org/repo`."""
    url = url.strip().rstrip("/")
    url = re.sub(r"^[a-z+]+://", "", url, flags=re.I)
    url = re.sub(r"^[^@/]*@", "", url)
    if ":" in url.split("/")[0]:  # scp-like host:path (a port stays a port only with a scheme)
        host, _, path = url.partition(":")
        url = f"{host}/{path}" if not path.isdigit() else url
    url = re.sub(r"\.git$", "", url)
    host, _, path = url.partition("/")
    return f"{host.lower()}/{path}"


def _run(args: tuple[str, ...], *, cwd: str, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    try:
        done = subprocess.run((*_BASE, *args), cwd=cwd, input=stdin, capture_output=True, env=env,
                              timeout=_TIMEOUT, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GitError(f"git {args[0]} failed: {error}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}: {message[0] if message else f'exit {done.returncode}'}")
    return done.stdout
