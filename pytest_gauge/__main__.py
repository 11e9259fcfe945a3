"""``python -m pytest_gauge``: see :mod:`pytest_gauge._internal.cli`."""

from __future__ import annotations

from ._internal.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
