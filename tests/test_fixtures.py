"""The bundled fixtures keep the promises `fixtures/README.md` makes (counts, anchors, bad records,
every code tie pointing at a real definition); `fixtures/check_fixtures.py` holds the checks."""

import subprocess
import sys
from pathlib import Path

CHECK = Path(__file__).resolve().parents[1] / "fixtures" / "check_fixtures.py"


def test_fixtures_match_their_readme():
    done = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
