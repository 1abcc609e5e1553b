"""`python -m bench` from the repository root, or `python -m noetlc.bench` from anywhere."""

from __future__ import annotations

from noetlc.bench.cli import main

raise SystemExit(main())
