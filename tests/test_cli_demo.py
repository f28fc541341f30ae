"""`soma-lsp demo`, the README's main job: a real LSP session against the bundled fixtures."""

import subprocess
import sys


def test_demo_shows_warnings_lenses_hover_related_and_bad_records():
    done = subprocess.run([sys.executable, "-m", "soma_lsp", "demo"], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "pool: 74 experiments in 19 files, 6 bad records" in out
    warnings = out.split("Dead-end warnings in model/transformer.py")[1].split("━━ Code lenses")[0]
    assert "[exp-0042] Dead end: rope-theta-500k" in warnings
    assert "related experiments · " in out.split("Code lenses in model/transformer.py")[1]
    hover = out.split("Hover on `class RotaryEmbedding`")[1].split("━━ Find related")[0]
    assert "rope-theta-500k · exp-0042 · failed · dead end" in hover and "lexical" in hover
    assert "tied" in out.split("Find related experiments")[1]
    assert "[exp-0131] Dead end: bf16-grad-accum-overflow" in out
    assert "line 2: name: is required" in out
