"""noetlc.compiler.surface."""
