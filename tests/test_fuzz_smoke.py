"""A short run of every fuzz target (tests/fuzz/targets.py) in the test suite; `make fuzz` runs them
long (tests/fuzz/run.py, docs/reliability.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from fuzz import targets

SMOKE = settings(max_examples=40, suppress_health_check=list(HealthCheck), database=None)


@pytest.mark.parametrize("name", list(targets.TARGETS))
def test_fuzz_smoke(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SOMA_FUZZ_DIR", str(tmp_path))
    targets.hypothesis_test(name, SMOKE)()
