"""noetlc: compiler and virtual machines for NoETL playbooks."""

__version__ = "0.1.0"
FORMAT_VERSION = (
    4  # 4: the control program is transition records, not instructions (3: code hashes)
)
