"""The live-call runner: retries collapse into one outcome, classified by reach."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runplane.errors import ConfigError, RetryableError, TerminalError
from runplane.providers import PeerCallError, Reach
from services.executor.live import (
    CallPolicy,
    CallStatus,
    LiveCallRunner,
    Retry,
    Stop,
    decide_after_failure,
)


def _script(*steps: Any) -> tuple[Callable[[], Awaitable[Any]], list[int]]:
    """A call that raises or returns the next scripted step; counts invocations."""
    calls = [0]

    async def call() -> Any:
        step = steps[min(calls[0], len(steps) - 1)]
        calls[0] += 1
        if isinstance(step, BaseException):
            raise step
        if step == "hang":
            await asyncio.sleep(10)
        return step

    return call, calls


async def _no_sleep(_: float) -> None:
    return None


def _runner(max_inflight: int = 4) -> LiveCallRunner:
    return LiveCallRunner(max_inflight, sleep=_no_sleep)


def _refused() -> PeerCallError:
    return PeerCallError("refused", reach=Reach.NOT_REACHED, retryable=True)


def _in_doubt() -> PeerCallError:
    return PeerCallError("500", reach=Reach.IN_DOUBT, retryable=True, status=500)


async def test_connection_refused_is_retried_even_when_mutating() -> None:
    call, calls = _script(_refused(), _refused(), {"charge_id": "c1"})
    out = await _runner().run(call, CallPolicy(mutating=True, max_attempts=5))
    assert (out.status, out.value, out.attempts) == (CallStatus.OK, {"charge_id": "c1"}, 3)
    assert calls[0] == 3


async def test_in_doubt_mutation_is_not_retried() -> None:
    call, calls = _script(_in_doubt(), "never")
    out = await _runner().run(call, CallPolicy(mutating=True, max_attempts=5))
    assert (out.status, out.attempts, out.reach) == (CallStatus.IN_DOUBT, 1, Reach.IN_DOUBT)
    assert calls[0] == 1


async def test_in_doubt_safe_call_is_retried() -> None:
    call, calls = _script(_in_doubt(), 42)
    out = await _runner().run(call, CallPolicy(mutating=False))
    assert (out.status, out.value, out.attempts) == (CallStatus.OK, 42, 2)
    assert calls[0] == 2


async def test_timeout_of_mutation_is_in_doubt() -> None:
    call, _ = _script("hang")
    out = await _runner().run(call, CallPolicy(mutating=True, timeout_s=0.05))
    assert out.status is CallStatus.IN_DOUBT
    assert out.error_type == "CallTimeout"


async def test_retries_exhausted_become_one_failed_outcome() -> None:
    call, calls = _script(_refused())
    out = await _runner().run(call, CallPolicy(max_attempts=3))
    assert (out.status, out.attempts, out.retryable) == (CallStatus.FAILED, 3, True)
    assert calls[0] == 3
    assert out.error_type == "PeerCallError"


async def test_terminal_error_fails_at_once() -> None:
    call, calls = _script(TerminalError("card declined"), 1)
    out = await _runner().run(call, CallPolicy(max_attempts=5))
    assert (out.status, out.attempts, out.error_message) == (CallStatus.FAILED, 1, "card declined")
    assert calls[0] == 1


async def test_plain_exception_of_mutation_is_trusted_as_failure() -> None:
    call, calls = _script(ValueError("bad amount"), 1)
    out = await _runner().run(call, CallPolicy(mutating=True, max_attempts=5))
    assert (out.status, out.error_type, calls[0]) == (CallStatus.FAILED, "ValueError", 1)


def test_backoff_grows_and_honours_retry_after() -> None:
    policy = CallPolicy(initial_backoff_s=0.1, backoff_multiplier=2, max_backoff_s=0.3)
    assert [policy.backoff(a) for a in (1, 2, 3)] == pytest.approx([0.1, 0.2, 0.3])
    busy = PeerCallError("429", reach=Reach.REJECTED, retryable=True, retry_after=0.25)
    assert decide_after_failure(busy, policy, 1) == Retry(0.25)
    assert decide_after_failure(RetryableError("x", retry_after=9), policy, 1) == Retry(0.3)
    rejected = PeerCallError("400", reach=Reach.REJECTED, retryable=False)
    assert decide_after_failure(rejected, policy, 1) == Stop(
        CallStatus.FAILED, retryable=False, reach=Reach.REJECTED
    )


async def test_inflight_is_bounded() -> None:
    runner = _runner(max_inflight=2)
    peak = [0]

    async def call() -> int:
        peak[0] = max(peak[0], runner.inflight)
        await asyncio.sleep(0.01)
        return 1

    outs = await asyncio.gather(*(runner.run(call, CallPolicy()) for _ in range(10)))
    assert all(o.status is CallStatus.OK for o in outs)
    assert peak[0] == 2
    assert runner.inflight == 0


def test_bad_policy_is_refused() -> None:
    with pytest.raises(ConfigError):
        CallPolicy(max_attempts=0)
    with pytest.raises(ConfigError):
        LiveCallRunner(0)


# -- a mutating call with a deadline (a reconciling one: its doubt is probed after it) --------


async def test_a_slow_mutation_is_in_doubt_by_its_deadline_not_its_full_timeout() -> None:
    now = [1_000_000.0]
    runner = LiveCallRunner(4, sleep=_no_sleep, wall_ms=lambda: now[0])
    call, calls = _script("hang")
    policy = CallPolicy(timeout_s=5.0, mutating=True, deadline_ms=int(now[0]) + 50)
    out = await runner.run(call, policy)
    # Unanswered: in doubt (its recovery decides), never a failure; cut at the deadline.
    assert out.status is CallStatus.IN_DOUBT and calls[0] == 1
    assert out.error_type == "CallTimeout" and out.elapsed_s < 1.0


async def test_an_attempt_that_cannot_start_before_the_deadline_is_not_sent() -> None:
    now = [1_000_000.0]
    runner = LiveCallRunner(1, sleep=_no_sleep, wall_ms=lambda: now[0])
    call, calls = _script({"charge_id": "c1"})
    # The deadline passed while the call waited for a slot (a starved executor).
    policy = CallPolicy(mutating=True, deadline_ms=int(now[0]) - 1)
    out = await runner.run(call, policy)
    assert out.status is CallStatus.IN_DOUBT and calls[0] == 0
    assert out.error_type == "DeadlinePassed"
    # A call without a deadline is sent as before.
    out = await runner.run(call, CallPolicy(mutating=True))
    assert out.status is CallStatus.OK and calls[0] == 1


async def test_a_read_that_times_out_keeps_retrying_and_fails() -> None:
    call, calls = _script("hang")
    out = await _runner().run(call, CallPolicy(timeout_s=0.01, max_attempts=2))
    assert out.status is CallStatus.FAILED and out.retryable and calls[0] == 2
