"""Every call to a model: the gateway (cache, limits, retries, diagnosis), the backends behind it, the
response store, the ledger and prices, the endpoint settings and the doctor that checks them."""
