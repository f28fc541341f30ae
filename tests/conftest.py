import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # test helpers such as spec_reference

# Snapshots go to a directory of this run's own (servers and CLIs the tests start inherit it), never to
# the user's cache.
SNAPSHOTS = os.environ["SOMA_CACHE_DIR"] = tempfile.mkdtemp(prefix="soma-test-cache-")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SNAPSHOTS, ignore_errors=True)
