"""What every test shares: the helpers on the import path, a cache directory of the run's own, and
Hypothesis without deadlines."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))  # test helpers such as spec_reference

# Snapshots go to a directory of this run's own (servers and CLIs the tests start inherit it), never to
# the user's cache.
SNAPSHOTS = os.environ["SOMA_CACHE_DIR"] = tempfile.mkdtemp(prefix="soma-test-cache-")

# No wall-clock limit on a property's examples (hypothesis's default is 200 ms each): the machine running
# the tests may be busy, and a test that fails because it was slow says nothing about the behaviour.
settings.register_profile("soma", deadline=None)
settings.load_profile("soma")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SNAPSHOTS, ignore_errors=True)
