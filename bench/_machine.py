"""What every benchmark prints beside its figures: the machine, and where the figures go."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import numpy as np


def describe_machine() -> str:
    """CPU model, cores, memory, Python and numpy versions, as one Markdown line."""
    cpu = "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        memory = f", {kib / 2**20:.0f} GiB"
    except (OSError, AttributeError):
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"Machine: {cpu}, {os.cpu_count()} cores{memory}; Python {platform.python_version()}, "
            f"numpy {np.__version__}; load average {load} (other work on the machine inflates times).")


def replace_section(path: Path, heading: str, text: str) -> None:
    """Put `text` (starting with `heading`) in place of that section of a Markdown file, or append it."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text.rstrip() + "\n\n", current, count=1)
    else:
        updated = current.rstrip() + "\n\n" + text
    path.write_text(updated.rstrip() + "\n")
