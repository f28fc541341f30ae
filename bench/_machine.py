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


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU time of a process so far (0 once it has gone); `children`: with its children's,
    those it has waited for (`cutime`, `cstime`) and those still running (a server's counting child)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(value) for value in fields[11:15 if children else 13])
    seconds = ticks / os.sysconf("SC_CLK_TCK")
    if children:
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                running = task.read_text().split()
            except OSError:
                continue
            seconds += sum(cpu_seconds(int(child), children=True) for child in running)
    return seconds


def replace_section(path: Path, heading: str, text: str) -> None:
    """Put `text` (starting with `heading`) in place of that section of a Markdown file, or append it."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text.rstrip() + "\n\n", current, count=1)
    else:
        updated = current.rstrip() + "\n\n" + text
    path.write_text(updated.rstrip() + "\n")
