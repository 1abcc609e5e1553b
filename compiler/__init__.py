"""noetlc.compiler."""
