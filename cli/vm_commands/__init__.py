"""`noetl-vm` subcommands."""
