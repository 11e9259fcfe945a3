"""Your own agent code under test (a ``CallableAgent``), as a package so its modules import plainly."""
