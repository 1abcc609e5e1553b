"""`jsonable`: database values become the JSON-like data results are stored as."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

from noetlc.stdlib_tools.envelope import jsonable


def test_database_values_become_json_data() -> None:
    value = {
        "whole": decimal.Decimal("2.000"),
        "part": decimal.Decimal("1.5"),
        "id": uuid.UUID(int=1),
        "when": dt.date(2026, 1, 2),
        "took": dt.timedelta(seconds=3),
        "raw": b"\x00\x01",
        "rows": (1, 2),
    }
    assert jsonable(value) == {
        "whole": 2,
        "part": 1.5,
        "id": "00000000-0000-0000-0000-000000000001",
        "when": "2026-01-02",
        "took": 3.0,
        "raw": "AAE=",
        "rows": [1, 2],
    }
    assert type(jsonable(decimal.Decimal("2.000"))) is int
