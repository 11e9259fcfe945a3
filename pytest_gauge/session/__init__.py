"""One pytest process and its xdist role: the run's state, the fixtures handed to tests, and the
controller's end of the run (outputs, gates, reports)."""
