"""Live calls: one outward call carried out with a timeout, retries and a bound on concurrency.

Every attempt's failure is classified by one question — did it reach the peer? — and the
retries collapse into one outcome with an attempts count (the journal records the outcome, not
the retry saga)::

    failure                              safe call            mutating call
    ───────────────────────────────────  ───────────────────  ──────────────────────────
    NOT_REACHED (connection refused)     retry                retry (provably not done)
    REJECTED + retryable (429, 503)      retry                retry (peer said not done)
    REJECTED, not retryable (4xx)        FAILED               FAILED
    IN_DOUBT (timeout after send, 5xx)   retry                IN_DOUBT → declared recovery
    TerminalError                        FAILED               FAILED
    RetryableError                       retry                retry (the tool says so)
    other exception                      retry                FAILED (it ran; trust it)

A retry that has no attempts left becomes FAILED with ``retryable=True`` in the error, except
the in-doubt case of a mutating call, which is never turned into a failure: the journal must
not claim "not done" for something that may have happened. A mutating call unanswered within
its timeout (a slow peer, a starved machine) is such a case: IN_DOUBT, and the core runs its
declared recovery — a probe after its deadline, an operator's task — instead of failing the run.

A call with a deadline (``CallPolicy.deadline_ms``: a reconciling mutation, whose doubt is
probed only after it) never has an attempt outstanding past that instant: each attempt's
timeout is cut to what is left of it, and one that cannot start before it (waiting for a free
slot under load) is not sent — IN_DOUBT as well, so the probe finds it not applied and the
core performs it again, rather than a request leaving after the probe has looked.

The policy (``decide_after_failure``) is a pure function; :class:`LiveCallRunner` is the thin
asyncio shell (timeouts, sleeping, a semaphore bounding calls in flight per instance).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runplane.errors import ConfigError, RetryableError, TerminalError
from runplane.providers import PeerCallError, Reach


@dataclass(frozen=True)
class CallPolicy:
    """How one effect is carried out live; built from the effect's declaration."""

    timeout_s: float = 30.0
    max_attempts: int = 3
    initial_backoff_s: float = 0.05
    backoff_multiplier: float = 2.0
    max_backoff_s: float = 2.0
    mutating: bool = False
    # Wall-clock ms after which no attempt may be outstanding (``LiveCall.deadline_ms``).
    deadline_ms: int | None = None

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ConfigError("timeout_s must be positive")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.backoff_multiplier < 1:
            raise ConfigError("backoff must be non-negative and non-shrinking")

    def backoff(self, attempt: int) -> float:
        """Delay before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        return min(
            self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier ** (attempt - 1)
        )


class CallStatus(StrEnum):
    """How all attempts of one live call ended (its outcome metric's label)."""

    OK = "ok"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"


@dataclass(frozen=True)
class LiveOutcome:
    """The collapsed result of all attempts of one call."""

    status: CallStatus
    attempts: int
    elapsed_s: float
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    retryable: bool = False
    reach: Reach | None = None


@dataclass(frozen=True)
class Retry:
    delay_s: float


@dataclass(frozen=True)
class Stop:
    status: CallStatus
    retryable: bool
    reach: Reach | None


class CallTimeout(Exception):
    """Our own per-attempt timeout fired; the request may have been sent."""


class DeadlinePassed(CallTimeout):
    """The call's deadline came before this attempt could be sent (``CallPolicy.deadline_ms``);
    in doubt like any timeout of a mutation: its recovery decides, never a failed run."""


def classify(exc: BaseException, mutating: bool) -> tuple[Reach | None, bool, float | None]:
    """(reach, may retry, retry_after) for one failed attempt."""
    if isinstance(exc, PeerCallError):
        may = exc.retryable and not (mutating and exc.reach is Reach.IN_DOUBT)
        return exc.reach, may, exc.retry_after
    if isinstance(exc, CallTimeout):
        return Reach.IN_DOUBT, not mutating, None
    if isinstance(exc, TerminalError):
        return None, False, None
    if isinstance(exc, RetryableError):
        return None, True, exc.retry_after
    return None, not mutating, None


def decide_after_failure(exc: BaseException, policy: CallPolicy, attempt: int) -> Retry | Stop:
    """Pure: what to do after attempt ``attempt`` (from 1) failed with ``exc``."""
    reach, may_retry, retry_after = classify(exc, policy.mutating)
    if policy.mutating and reach is Reach.IN_DOUBT:
        return Stop(CallStatus.IN_DOUBT, retryable=False, reach=reach)
    if may_retry and attempt < policy.max_attempts:
        delay = policy.backoff(attempt)
        if retry_after is not None:
            delay = max(delay, min(retry_after, policy.max_backoff_s))
        return Retry(delay)
    return Stop(CallStatus.FAILED, retryable=may_retry, reach=reach)


class LiveCallRunner:
    """Carries out live calls; at most ``max_inflight`` attempts run at once on this instance."""

    def __init__(
        self,
        max_inflight: int,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], float] = lambda: time.time() * 1000,
    ) -> None:
        if max_inflight < 1:
            raise ConfigError("RUNPLANE_EXECUTOR_MAX_INFLIGHT must be at least 1")
        self._slots = asyncio.Semaphore(max_inflight)
        self._sleep = sleep
        self._clock = clock
        self._wall_ms = wall_ms  # the clock the journal's stamps (and a deadline) are on
        self.inflight = 0

    async def run(self, call: Callable[[], Awaitable[Any]], policy: CallPolicy) -> LiveOutcome:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            try:
                value = await self._attempt(call, policy)
            except Exception as exc:
                step = decide_after_failure(exc, policy, attempt)
                if isinstance(step, Retry):
                    # Sleep outside the semaphore: a call backing off holds no slot.
                    await self._sleep(step.delay_s)
                    continue
                return LiveOutcome(
                    status=step.status,
                    attempts=attempt,
                    elapsed_s=self._clock() - started,
                    error_type=type(exc).__name__,
                    error_message=str(exc),
                    retryable=step.retryable,
                    reach=step.reach,
                )
            return LiveOutcome(
                status=CallStatus.OK,
                attempts=attempt,
                elapsed_s=self._clock() - started,
                value=value,
            )

    async def _attempt(self, call: Callable[[], Awaitable[Any]], policy: CallPolicy) -> Any:
        async with self._slots:
            timeout_s = policy.timeout_s
            if policy.deadline_ms is not None:
                # Asked once the slot is ours: the wait for it may have used the deadline up.
                left_s = (policy.deadline_ms - self._wall_ms()) / 1000
                if left_s <= 0:
                    raise DeadlinePassed(f"not sent: its deadline {policy.deadline_ms} passed")
                timeout_s = min(timeout_s, left_s)
            self.inflight += 1
            try:
                # asyncio.timeout, not wait_for: no extra task per attempt on the hot path.
                async with asyncio.timeout(timeout_s):
                    return await call()
            except TimeoutError as exc:
                raise CallTimeout(f"no answer within {timeout_s}s") from exc
            finally:
                self.inflight -= 1
