"""runplane: durable AI agents and business workflows on Apache Kafka.

This is the front door: services and agent authors import from here, never from the
private modules. ``tests/unit/test_exports.py`` pins ``__all__``.
"""

from __future__ import annotations

from runplane.config import Settings
from runplane.errors import (
    CalendarError,
    ChainError,
    ConfigError,
    NonDeterminismError,
    RetryableError,
    RunplaneError,
    SchemaError,
    TerminalError,
    WireError,
)

__all__ = [
    "CalendarError",
    "ChainError",
    "ConfigError",
    "NonDeterminismError",
    "RetryableError",
    "RunplaneError",
    "SchemaError",
    "Settings",
    "TerminalError",
    "WireError",
]
