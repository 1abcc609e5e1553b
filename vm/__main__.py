"""`python -m noetlc.vm` is the `noetl-vm` command."""

import sys

from noetlc.vm.cli import main

sys.exit(main())
