"""noetlc: compiler and virtual machines for NoETL playbooks."""

__version__ = "0.1.0"
FORMAT_VERSION = 1
