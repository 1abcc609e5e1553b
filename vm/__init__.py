"""noetlc.vm."""
