"""Execution ids: NoETL's 64-bit snowflake integers, written in decimal, in every mode.

NoETL numbers executions, catalog entries and credentials with snowflake ids (noetl/noetl
`noetl/core/common.py`, `get_snowflake_id`: 41 bits of milliseconds since an epoch, 10 bits of
node id, a 12-bit sequence), and playbooks splice `{{ execution_id }}` unquoted into SQL
`BIGINT` columns. noetlc uses the same layout: `snowflake()` for a new execution (embedded
`run`, `submit`, the service), a catalog entry or a credential; the 10 node bits are the
process id's low bits, so two processes of one machine differ there. A child execution's id
(`kind: playbook`) is `child_execution_id`: a function of the call, so a re-run of the parent's
action finds the child the first run started; it is a positive 63-bit integer like the others
but not time-ordered. Ids travel as strings of digits (NoETL's API sends them as strings too:
JavaScript clients lose precision on 64-bit numbers).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

_EPOCH_MS = 1_288_834_974_657  # the usual snowflake epoch (2010-11-04)
_lock = threading.Lock()
_last = [0, 0]  # (millisecond, sequence)
_MAX = (1 << 63) - 1  # a positive signed 64-bit integer: PostgreSQL's BIGINT


def snowflake() -> str:
    """A new 64-bit id as decimal digits: milliseconds since the epoch, 10 bits of process id,
    a 12-bit sequence. Ids of one process increase; two processes differ in the middle bits."""
    with _lock:
        now = int(time.time() * 1000) - _EPOCH_MS
        last, seq = _last
        if now <= last:
            now, seq = last, seq + 1
            if seq >= 4096:
                now, seq = last + 1, 0
        else:
            seq = 0
        _last[:] = [now, seq]
    return str((now << 22) | ((os.getpid() & 0x3FF) << 12) | seq)


def child_execution_id(parent_id: str, action_id: str, task: str, attempt: int) -> str:
    """The id of the child a `kind: playbook` task starts: a function of the call, so a re-run
    of the parent's action (resume, a re-leased job) finds the child the first run started
    instead of starting another; a retry (next attempt) starts a new one."""
    digest = hashlib.sha256(f"{parent_id}/{action_id}/{task}/{attempt}".encode()).digest()
    return str(int.from_bytes(digest[:8], "big") & _MAX or 1)


def is_execution_id(text: str) -> bool:
    """Decimal digits of a positive 64-bit integer: the shape of every execution id."""
    return text.isascii() and text.isdigit() and 0 < int(text) <= _MAX
