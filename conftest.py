"""Repository-wide pytest configuration.

Being at the repo root, this file also puts the root on ``sys.path``, so the project's tests can share
helpers as ``tests.helpers`` whichever way pytest is started (``pytest`` or ``python -m pytest``).
"""

pytest_plugins = ["pytester"]
