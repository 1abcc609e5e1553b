"""`noetlc.digest` gives hashlib's SHA-256 digests, with or without OpenSSL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from noetlc import digest

INPUTS = [b"", b"abc", b"x" * 1000, b"y" * (digest.SMALL + 1)]


@pytest.mark.parametrize("data", INPUTS, ids=["empty", "short", "1k", "past-small"])
def test_the_digests_are_hashlibs(data: bytes) -> None:
    import hashlib

    expected = hashlib.sha256(data).hexdigest()
    assert digest.sha256_hex(data) == expected
    h = digest.sha256()
    h.update(data[:7])
    h.update(data[7:])
    assert h.hexdigest() == expected
    assert digest.sha256(data).digest() == hashlib.sha256(data).digest()


def test_small_inputs_leave_hashlib_unloaded_and_large_ones_load_it() -> None:
    code = (
        "import sys\n"
        "from noetlc import digest\n"
        "digest.sha256_hex(b'abc')\n"
        "print('hashlib' in sys.modules)\n"
        "digest.sha256_hex(b'x' * (digest.SMALL + 1))\n"
        "print('hashlib' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True"]
