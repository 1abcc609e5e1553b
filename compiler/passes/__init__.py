"""noetlc.compiler.passes."""
