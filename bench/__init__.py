"""noetlc.bench."""
