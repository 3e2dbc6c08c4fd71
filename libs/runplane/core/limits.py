"""A run's stated limits: what one run may grow to before it could wedge a partition. Pure.

Every record of a run travels through Kafka, whose messages are bounded (``message.max.bytes``,
1 MiB by default): a result body, a snapshot (which carries the buffered signals) or an output
past it would fail its transaction, and the executor would abort, rebuild and fail the same
way again — the partition stuck behind one run. So each is bounded *before* it is written,
with a typed refusal the agent (or the sender) sees:

==========================  ==========  ==============================================================
limit                       default     when exceeded
==========================  ==========  ==============================================================
``max_result_bytes``        900,000     the call fails with ``ResultTooLarge`` (recorded; nothing
                                        of the body is kept); an agent output that large fails the
                                        run with it
``max_journal_records``     1,000,000   the next effect fails with ``HistoryTooLong`` (recorded):
                                        the agent may ``ctx.continue_as_new``; one that goes on
                                        past ``+ HISTORY_GRACE`` records is failed
``max_signal_bytes``        65,536      the signal is refused (dead-lettered; ``runplane signal``
                                        and the HTTP endpoint refuse it before sending)
``max_buffered_signals``    256         a signal nobody waits for yet is refused past this many
``max_buffered_bytes``      524,288     ... or past this many payload bytes buffered
==========================  ==========  ==============================================================

Input size is admission's (``RUNPLANE_ADMISSION_MAX_INPUT_BYTES``, default
``DEFAULT_MAX_INPUT_BYTES``): a run never starts with an input it could not carry, and the
emitter client refuses a larger one before it produces anything (``Client.admit``). The executor reads these from ``RUNPLANE_MAX_*`` (``limits_from_env``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from runplane.errors import ConfigError
from runplane.wire import ErrorInfo

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_INPUT_BYTES",
    "HISTORY_GRACE",
    "MAX_INPUT_BYTES_ENV",
    "Limits",
    "limits_from_env",
    "too_large",
]

# A run's input, at most (admission refuses more; well under Kafka's 1 MiB message).
DEFAULT_MAX_INPUT_BYTES: Final = 512 * 1024
MAX_INPUT_BYTES_ENV: Final = "RUNPLANE_ADMISSION_MAX_INPUT_BYTES"

# Records a run may still write after its first HistoryTooLong (to clean up and continue as
# new); past them the run is failed.
HISTORY_GRACE: Final = 64


@dataclass(frozen=True)
class Limits:
    """Per-run limits (see the module docstring). All must be positive."""

    max_result_bytes: int = 900_000
    max_journal_records: int = 1_000_000
    max_signal_bytes: int = 65_536
    max_buffered_signals: int = 256
    max_buffered_bytes: int = 524_288

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS: Final = Limits()


def too_large(body_json: str, limit: int) -> ErrorInfo | None:
    """``ResultTooLarge`` when ``body_json`` is over ``limit`` bytes (UTF-8), else None."""
    # Characters first: a str is never shorter in UTF-8, so most bodies skip the encode.
    if len(body_json) <= limit // 4:
        return None
    size = len(body_json.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return ErrorInfo(
        type="ResultTooLarge",
        message=f"the body is {size} bytes, over this run's limit of {limit} (max_result_bytes)",
        retryable=False,
    )


def limits_from_env(env: Mapping[str, str] | None = None) -> Limits:
    """``RUNPLANE_MAX_RESULT_BYTES``, ``RUNPLANE_MAX_JOURNAL_RECORDS``, … (the field names,
    upper-cased, after ``RUNPLANE_``); unset ones keep their defaults."""
    source = os.environ if env is None else env
    given: dict[str, int] = {}
    for f in fields(Limits):
        raw = source.get(f"RUNPLANE_{f.name.upper()}")
        if raw is None or not raw.strip():
            continue
        try:
            given[f.name] = int(raw)
        except ValueError:
            raise ConfigError(
                f"RUNPLANE_{f.name.upper()} must be an integer, got {raw!r}"
            ) from None
    try:
        return Limits(**given)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
