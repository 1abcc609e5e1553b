"""noetlc: compiler and virtual machines for NoETL playbooks."""

__version__ = "0.1.0"
FORMAT_VERSION = 2  # 2: exclusive routing negates earlier arcs by rank (GUARD_NOT_ANY)
