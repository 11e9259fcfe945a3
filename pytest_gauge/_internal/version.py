"""The package's version, in a module of its own so the file formats that record it import no more than
this (``pytest_gauge.__version__`` is the same string; pyproject.toml's version must match it)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
