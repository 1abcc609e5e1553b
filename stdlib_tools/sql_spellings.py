"""Argument spellings shared by the kinds table and the schemas (imports nothing)."""

from __future__ import annotations

SQL_SPELLINGS = "query command sql"
"""The spellings of an SQL tool's statement, in order of preference."""
