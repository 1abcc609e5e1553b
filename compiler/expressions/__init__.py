"""noetlc.compiler.expressions."""
