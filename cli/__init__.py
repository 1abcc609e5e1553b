"""noetlc.cli: the `noetlc` and `noetl-vm` command lines (the top layer)."""
