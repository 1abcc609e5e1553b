"""noetlc.runtime.postgres."""
