"""soma-lsp: the experiments you already ran, where you edit the code they bear on."""

__version__ = "0.1.0"
