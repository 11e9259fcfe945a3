"""Every on-disk format and folder layout: baselines, the output folder read back for the HTML page,
replay recordings and the shard manifest."""
