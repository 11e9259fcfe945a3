"""``python -m pytest_gauge``: see :mod:`pytest_gauge.cli`."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
