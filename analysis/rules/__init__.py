"""One module per lint rule, each with one entry point `run(ctx)` (see `registry.RULES`)."""
