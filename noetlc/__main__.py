"""`python -m noetlc` is the `noetlc` command (`python -m noetlc.cli.vm_main` is `noetl-vm`)."""

import sys

from noetlc.cli.noetlc_main import main

sys.exit(main())
