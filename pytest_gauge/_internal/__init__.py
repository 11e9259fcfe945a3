"""The package's machinery, in stages (docs/architecture.md): nothing here is public API.

The public surface is :data:`pytest_gauge.__all__`, the fixtures, the markers, the ``--gauge-*`` flags and
ini keys, ``python -m pytest_gauge`` and :mod:`pytest_gauge.testing`; everything under ``_internal`` may
change in any release, as httpx's underscore modules may."""
