"""noetlc: compiler and virtual machines for NoETL playbooks."""

__version__ = "0.1.0"
FORMAT_VERSION = (
    3  # 3: the pool stores code hashes, not code; control blocks lost EMIT, DISPATCH, JOIN
)
