"""Delays that keep the server out of the way of typing (seconds)."""

DIAGNOSTIC_DEBOUNCE = 0.35  # quiet typing before a document's diagnostics are recomputed
LENS_DEBOUNCE = 0.6  # … and its lenses (kept where they were, mapped through edits, until then)
POOL_REFRESH_DELAY = 0.1  # after a pool change refreshed open documents, later ones wait this long (coalesced)
