"""noetlc.compiler.desugar."""
