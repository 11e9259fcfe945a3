"""The end of a run, on the process that ends it: outputs, gates and reports, and ``merge`` of shards."""
