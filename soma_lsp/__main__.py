"""`python -m soma_lsp`: the same command line as the `soma-lsp` script (what editors start when no
script is on the PATH, and how the benches start the server under a chosen interpreter)."""

import sys

from .cli import entry

sys.exit(entry())
