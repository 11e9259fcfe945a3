"""One pytest process: its xdist role, its state, the run folder's workers and stops, and the adaptive
looks as the processes take them."""
