"""Real git repositories for the tests of ties from git: `git(cwd, *args)`, `commit(repo, …)`, and the
model file whose definitions the commits change (`MODEL`)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` (a fixed identity, whatever the machine's config); its output, stripped."""
    return subprocess.run(("git", *args), cwd=cwd, env={**os.environ, **_IDENTITY}, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    """Write `files` (path → text), commit them; the new commit's sha."""
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


MODEL = textwrap.dedent('''\
    import torch


    class RotaryEmbedding:
        def __init__(self, dim, theta=10000.0):
            self.dim = dim
            self.theta = theta

        def forward(self, x):
            return x


    class RMSNorm:
        def forward(self, x):
            return x / 2


    def train_step(model, batch):
        return model(batch)
    ''')
