"""noetlc.runtime."""
