"""noetlc.stdlib_tools."""
