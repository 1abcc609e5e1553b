"""noetlc.diagnostics: diagnostics, their codes and the error base every layer uses."""
