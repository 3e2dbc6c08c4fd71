"""Serving a recorded result to the agent: the value its op decodes to, or the recorded
failure as the ``EffectError`` subclass the agent may catch."""

from __future__ import annotations

import json
from typing import Any, Final

from runplane.core.effect import (
    ApprovalExpired,
    CaseRefused,
    Effect,
    EffectError,
    RunCancelled,
    WaitTimedOut,
)
from runplane.core.engine.recorder import Recorder
from runplane.core.engine.table import DECODE
from runplane.core.engine.vocab import Resolution, Throw, Value
from runplane.core.releases import TYPED_ERRORS
from runplane.wire import ErrorInfo, ResultEntry

__all__ = ["error_from", "error_info", "identity", "serve"]


def serve(rec: Recorder, effect: Effect, entry: ResultEntry) -> Resolution:
    """What the agent gets for ``entry``: its decoded value, or its failure raised."""
    if not entry.ok:
        assert entry.error is not None  # the wire validator guarantees it
        return Throw(error_from(entry.error))
    fresh, rec.decoded = rec.decoded, None
    if fresh is not None and fresh[0] is entry:
        raw = fresh[1]  # just recorded: decoded once already
    else:
        raw = json.loads(entry.value_json) if entry.value_json is not None else None
    try:
        # tuple.__new__, not Value(...): a NamedTuple's __new__ is a Python function, and
        # every effect served goes through here.
        return tuple.__new__(Value, (DECODE.get(effect.op, identity)(effect, raw),))
    except EffectError as exc:
        return Throw(exc)


def error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, EffectError):
        return ErrorInfo(type=exc.type, message=exc.message, retryable=exc.retryable)
    return ErrorInfo(type=type(exc).__name__, message=str(exc), retryable=False)


def error_from(error: ErrorInfo) -> EffectError:
    if error.type == "ApprovalExpired":
        return ApprovalExpired(error.type, error.message, retryable=error.retryable)
    if error.type == "CaseRefused":
        return CaseRefused(error.message)
    raised = _RAISED.get(error.type)
    if raised is not None:
        return raised(error.type, error.message, retryable=error.retryable)
    if (typed := TYPED_ERRORS.get(error.type)) is not None:
        return typed(error.message)  # SinkRefused, BudgetExceeded, ReleaseRefused
    return EffectError(error.type, error.message, retryable=error.retryable)


# Recorded failures raised as their own subclass, so an agent can catch them by type.
_RAISED: Final[dict[str, type[EffectError]]] = {
    "RunCancelled": RunCancelled,
    "WaitTimedOut": WaitTimedOut,
}


def identity(effect: Effect, raw: Any) -> Any:
    """An op's value as recorded, or as its effect's own ``decode`` option reads it."""
    decode = effect.options.get("decode")
    return decode(raw) if decode is not None else raw
