"""The runplane error hierarchy.

    RunplaneError
    ├── ConfigError              bad or missing configuration (terminal, at start-up)
    ├── WireError                a record that cannot be decoded or validated (dead-letter it)
    │   └── SchemaError          a record that does not fit its Avro schema
    ├── TerminalError            retrying reproduces it; the run fails or is quarantined
    │   ├── NonDeterminismError  replay issued a different call than history recorded
    │   ├── ChainError           a journal chain does not verify (names the position)
    │   └── CalendarError        a calendar refused a rule it does not implement
    └── RetryableError           transient; the caller may retry (retry_after in seconds)

Control flow that agent code must not swallow (parking, eviction) derives from
BaseException in ``runplane.core``, not from here, so ``except Exception:`` cannot eat it.
Retry decisions read typed fields, never messages.
"""

from __future__ import annotations


class RunplaneError(Exception):
    """Base of every error runplane raises on purpose."""


class ConfigError(RunplaneError):
    """Configuration is missing or invalid."""


class WireError(RunplaneError):
    """A record could not be decoded or validated; it belongs in the dead-letter topic."""


class SchemaError(WireError):
    """A record does not fit its Avro schema."""


class TerminalError(RunplaneError):
    """Retrying reproduces this error; do not retry."""


class NonDeterminismError(TerminalError):
    """Replay issued a call that differs from the one history recorded at that position."""


class ChainError(TerminalError):
    """A journal chain does not verify."""


class CalendarError(TerminalError):
    """A calendar refused a deadline rule it does not implement."""


class RetryableError(RunplaneError):
    """A transient failure; ``retry_after`` (seconds) hints when to try again."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
