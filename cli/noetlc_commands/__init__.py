"""`noetlc` subcommands: one module each, with `add_arguments(parser)` and `run(args) -> int`."""
