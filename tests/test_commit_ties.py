"""Ties from git commits, on real repositories made here with the `git` command line."""

from __future__ import annotations

import subprocess

import pytest

from soma_lsp.knobs import knob_settings
from soma_lsp.pool.commit_ties import CommitCache, CommitRun, commit_ties
from soma_lsp.pool.gitrepo import GitRepo, normalise_url, parse_log_patch
from git_support import MODEL as MODEL_V1, commit, git



@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "first", {"model/transformer.py": MODEL_V1, "README.md": "# model\n"})
    return root


def ties_of(root, *runs: CommitRun, cache: CommitCache | None = None):
    found, reason = GitRepo.find(str(root))
    assert found is not None, reason
    return commit_ties(found, runs, cache or CommitCache())


def names(tie_map, path) -> set[tuple[str, str]]:
    return {(t.record_id, t.qualname) for t in tie_map.for_path(str(path))}


def test_a_commit_ties_exactly_the_definitions_it_changed(repo):
    sha = commit(repo, "theta 1e6", {"model/transformer.py": MODEL_V1.replace("10000.0", "1e6")})
    tie_map = ties_of(repo, CommitRun("exp-1", sha, dead_end=True))
    assert names(tie_map, repo / "model/transformer.py") == {("exp-1", "RotaryEmbedding.__init__")}
    (tie,) = tie_map.for_path(str(repo / "model/transformer.py"))
    assert tie.commits_ago == 0 and not tie.changed_since and tie.blames_code and tie.commit == sha


def test_abbreviated_sha_and_an_unknown_one(repo):
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    tie_map = ties_of(repo, CommitRun("short", sha[:7]), CommitRun("unknown", "deadbeef" * 5))
    assert names(tie_map, repo / "model/transformer.py") == {("short", "RMSNorm.forward")}
    assert "unknown" in tie_map.skipped and "not in" in tie_map.skipped["unknown"]


def test_changed_since_flips_when_a_later_commit_touches_the_function(repo):
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    run = CommitRun("exp-1", sha, dead_end=True)
    (before,) = ties_of(repo, run).for_path(str(repo / "model/transformer.py"))
    assert not before.changed_since
    later = MODEL_V1.replace("x / 2", "x / 3").replace("return model(batch)", "return model(batch) * 1")
    commit(repo, "touch train_step only", {"model/transformer.py": later})
    (still,) = ties_of(repo, run).for_path(str(repo / "model/transformer.py"))
    assert not still.changed_since and still.commits_ago == 1
    commit(repo, "touch the norm", {"model/transformer.py": later.replace("x / 3", "x / 4")})
    (after,) = ties_of(repo, run).for_path(str(repo / "model/transformer.py"))
    assert after.changed_since and after.commits_ago == 2


def test_uncommitted_edits_count_as_changed_since(repo):
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    (repo / "model/transformer.py").write_text(MODEL_V1.replace("x / 2", "x / 5"))
    (tie,) = ties_of(repo, CommitRun("exp-1", sha)).for_path(str(repo / "model/transformer.py"))
    assert tie.changed_since


def test_a_rename_after_the_commit_keeps_the_tie(repo):
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    git(repo, "mv", "model/transformer.py", "model/layers.py")
    git(repo, "commit", "-q", "-m", "rename")
    tie_map = ties_of(repo, CommitRun("exp-1", sha))
    assert names(tie_map, repo / "model/layers.py") == {("exp-1", "RMSNorm.forward")}
    assert not tie_map.for_path(str(repo / "model/transformer.py"))


def test_a_commit_that_changed_no_code_ties_nothing(repo):
    sha = commit(repo, "docs", {"README.md": "# model\n\nmore words\n", "conf/run.yaml": "lr: 3e-4\n"})
    tie_map = ties_of(repo, CommitRun("exp-1", sha, dead_end=True))
    assert len(tie_map) == 0 and not tie_map.skipped


def test_a_merge_commit_is_read_against_its_first_parent(repo):
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side: norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    git(repo, "checkout", "-q", "main")
    commit(repo, "main: readme", {"README.md": "# model v2\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = git(repo, "rev-parse", "HEAD")
    tie_map = ties_of(repo, CommitRun("exp-1", merge))
    assert names(tie_map, repo / "model/transformer.py") == {("exp-1", "RMSNorm.forward")}


def test_a_run_of_another_repository_is_not_tied(repo):
    git(repo, "remote", "add", "origin", "git@github.com:lab/model.git")
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    tie_map = ties_of(repo, CommitRun("ours", sha, repo="https://github.com/lab/model"),
                      CommitRun("theirs", sha, repo="https://github.com/other/model.git"))
    assert names(tie_map, repo / "model/transformer.py") == {("ours", "RMSNorm.forward")}
    assert "another repository" in tie_map.skipped["theirs"]


def test_a_sweep_where_some_runs_succeeded_does_not_blame_the_code(repo):
    sha = commit(repo, "theta", {"model/transformer.py": MODEL_V1.replace("10000.0", "1e6")})
    runs = [CommitRun(f"ok-{i}", sha, succeeded=True, settings=knob_settings(f"lr=3e-4 seed={i}"))
            for i in range(4)]
    failed = CommitRun("bad", sha, dead_end=True, settings=knob_settings("lr=3e-3 seed=9 warmup=2k"))
    alone = CommitRun("alone", commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")}),
                      dead_end=True)
    ties = {t.record_id: t for t in ties_of(repo, *runs, failed, alone).for_path(str(repo / "model/transformer.py"))}
    assert ties["bad"].sweep is not None and not ties["bad"].blames_code
    assert ties["bad"].sweep.succeeded == 4
    assert ties["bad"].sweep.differs == ("lr=3e-3", "seed=9", "warmup=2k")
    assert ties["alone"].blames_code and ties["ok-0"].blames_code


def test_what_a_commit_changed_is_computed_once_and_kept(repo, tmp_path):
    sha = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    path = str(tmp_path / "cache" / "commits.json")
    first = CommitCache(path)
    ties_of(repo, CommitRun("exp-1", sha), cache=first)
    first.save()
    kept = CommitCache(path)
    assert sha in kept and [c.qualname for c in kept.get(sha)] == ["RMSNorm.forward"]
    # the history is rewritten under the cache: the kept answer for that sha is still the answer
    assert names(ties_of(repo, CommitRun("exp-1", sha), cache=kept), repo / "model/transformer.py") == {
        ("exp-1", "RMSNorm.forward")}
    (tmp_path / "cache" / "commits.json").write_text("{not json")
    assert sha not in CommitCache(path)  # an unreadable cache is no cache


def test_no_repository_says_why(tmp_path):
    found, reason = GitRepo.find(str(tmp_path))
    assert found is None and "not a git repository" in reason


def test_shallow_clone_without_the_commit_skips_it(repo, tmp_path):
    old = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    commit(repo, "more", {"README.md": "# again\n"})
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    tie_map = ties_of(clone, CommitRun("exp-1", old))
    assert len(tie_map) == 0 and "exp-1" in tie_map.skipped


def test_diff_parsing_of_deletions_and_quoted_paths():
    out = (b"\x01" + b"a" * 40 + b"\n\ndiff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"
           b"@@ -3,2 +2,0 @@\n-a\n-b\n@@ -9 +8,2 @@\n-c\n+d\n+e\n"
           b'diff --git "a/sp\\303\\251cial.py" "b/sp\\303\\251cial.py"\n--- "a/sp\\303\\251cial.py"\n'
           b'+++ "b/sp\\303\\251cial.py"\n@@ -1 +1 @@\n-x\n+y\n')
    (first, second) = parse_log_patch(out)["a" * 40]
    assert first.new_path == "x.py" and first.lines == (1, 7, 8)  # a deletion after line 2; 8 replaced by two
    assert second.new_path == "spécial.py" and second.lines == (0,)


@pytest.mark.parametrize("url", ["git@github.com:lab/model.git", "https://github.com/lab/model",
                                 "ssh://git@github.com/lab/model.git", "https://user@GitHub.com/lab/model/"])
def test_remote_urls_compare_by_host_and_path(url):
    assert normalise_url(url) == "github.com/lab/model"


def test_a_run_on_uncommitted_code_is_tied_through_its_patch(repo):
    sha = git(repo, "rev-parse", "HEAD")
    edited = MODEL_V1.replace("return x / 2", "eps = 1e-6\n        return x / (2 + eps)")
    (repo / "model/transformer.py").write_text(edited)
    patch = subprocess.run(("git", "diff"), cwd=repo, check=True, capture_output=True).stdout
    git(repo, "checkout", "--", "model/transformer.py")  # the run's edits were never committed
    tie_map = ties_of(repo, CommitRun("wandb-1", sha, patch=patch), CommitRun("plain", sha))
    assert names(tie_map, repo / "model/transformer.py") == {("wandb-1", "RMSNorm.forward"),
                                                            ("plain", "RotaryEmbedding"),
                                                            ("plain", "RotaryEmbedding.__init__"),
                                                            ("plain", "RotaryEmbedding.forward"),
                                                            ("plain", "RMSNorm"), ("plain", "RMSNorm.forward"),
                                                            ("plain", "train_step")}
    (tie,) = [t for t in tie_map.for_path(str(repo / "model/transformer.py")) if t.record_id == "wandb-1"]
    assert tie.changed_since  # today's RMSNorm.forward is not what the run ran


def test_a_patch_that_does_not_apply_ties_nothing(repo):
    sha = git(repo, "rev-parse", "HEAD")
    patch = (b"diff --git a/model/transformer.py b/model/transformer.py\n--- a/model/transformer.py\n"
             b"+++ b/model/transformer.py\n@@ -14,2 +14,2 @@\n     def forward(self, x):\n"
             b"-        return x / 7\n+        return x / 8\n")
    assert len(ties_of(repo, CommitRun("wandb-1", sha, patch=patch))) == 0


def test_detached_head_ties_relative_to_what_is_checked_out(repo):
    first = git(repo, "rev-parse", "HEAD")
    norm = commit(repo, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    commit(repo, "later", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 4")})
    git(repo, "checkout", "-q", "--detach", norm)
    (tie,) = ties_of(repo, CommitRun("exp-1", norm)).for_path(str(repo / "model/transformer.py"))
    assert tie.commits_ago == 0 and not tie.changed_since
    git(repo, "checkout", "-q", "--detach", first)  # before the run's commit: it is not in HEAD's history
    (tie,) = ties_of(repo, CommitRun("exp-1", norm)).for_path(str(repo / "model/transformer.py"))
    assert tie.commits_ago is None and tie.changed_since


def test_a_submodule_is_its_own_repository(repo, tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q", "-b", "main")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(repo), "lib")
    git(outer, "commit", "-q", "-m", "add lib")
    outer_sha = git(outer, "rev-parse", "HEAD")
    lib = outer / "lib"
    inner_sha = commit(lib, "norm", {"model/transformer.py": MODEL_V1.replace("x / 2", "x / 3")})
    tie_map = ties_of(lib, CommitRun("outer", outer_sha), CommitRun("inner", inner_sha))
    assert names(tie_map, lib / "model/transformer.py") == {("inner", "RMSNorm.forward")}
    assert "outer" in tie_map.skipped  # the superproject's commit is not the submodule's
