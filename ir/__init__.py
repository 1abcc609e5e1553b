"""noetlc.ir."""
