"""`python -m noetlc.compiler` is the `noetlc` command."""

import sys

from noetlc.compiler.cli import main

sys.exit(main())
