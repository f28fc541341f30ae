"""The experiment pool: where it is, how its files load, and how it stays live (docs/spec.md §1.1, §1.4, §4).

* `pool_roots(workspace_folders, setting, environ)` — the pool directories (spec §1.1).
* `load_file(path) -> FileLoad(records, problems)` — one file, never raises.
* `Problem` — `path:LINE: field.path: message` (0-based `line`, printed 1-based), `severity`, `kind`.
* `LivePool(roots, index)` — `load(progress)`, `apply(paths)`, `problems`, `files`, `subscribe(cb)`.
* `PoolWatcher(pool)` — the server's own watcher (watchfiles), `start()` / `stop()`.
"""

from .discover import DEFAULT_POOL, Roots, normalize, pool_roots
from .live import LivePool, PoolChange
from .loader import MAX_JSON_BYTES, MAX_YAML_BYTES, SUFFIXES, FileLoad, file_format, load_file
from .problems import KINDS, Problem
from .watch import PoolWatcher

__all__ = ["DEFAULT_POOL", "KINDS", "MAX_JSON_BYTES", "MAX_YAML_BYTES", "SUFFIXES", "FileLoad", "LivePool",
           "PoolChange", "PoolWatcher", "Problem", "Roots", "file_format", "load_file", "normalize",
           "pool_roots"]
