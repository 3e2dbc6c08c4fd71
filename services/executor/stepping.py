"""Applying a run's steps and serving its live calls (a mixin of ``Executor``).

A step leaves the engine through ``apply_step`` into the group-commit batch; the live calls
it asks for are launched at once, or after the batch commits when their announce must be
durable first (announce-before-act). A call's outcome comes back as a ``Completion`` on the
executor's queue and is drained on the loop thread, where the engine turns it into the next
step. The ``Executor`` owns the state and the methods declared here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import Context

from runplane.core import LiveCall, Runtime, Step
from runplane.core.engine import apply_step
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.tracing import current_context
from runplane.wire import SessionSnapshot
from services.executor.batch import Batch
from services.executor.calls import Completion, Performer, to_outcome
from services.executor.ending import Resident, RunEnding, RunOut
from services.executor.live import Verdict

__all__ = ["LiveSteps"]

log = logging.getLogger("services.executor.executor")


class LiveSteps(RunEnding):
    """Steps into the batch, live calls out and their outcomes back (a mixin)."""

    _wall_ms: Callable[[], int]
    _performer: Performer
    _completions: deque[Completion]
    _tasks: dict[asyncio.Task[None], str]
    _launched: int
    _tools: Mapping[str, Any]
    _trace: list[tuple[str, bytes]] | None

    @property
    def _batch(self) -> Batch:
        raise NotImplementedError  # the executor's current group-commit batch

    def _serve_delivery_reports(self) -> None:
        raise NotImplementedError

    def _apply(
        self, sid: str, p: int, runtime: Runtime, step: Step, previous: SessionSnapshot | None
    ) -> None:
        out = RunOut(self, sid, p)
        parked = previous.parked_on if previous is not None else None
        if apply_step(step, out, parked_before=parked, clock=self._wall_ms):
            return
        # The step's trace context, for the spans of the calls it requested (None: untraced).
        parent = current_context() if self._trace else None
        for call in step.live_calls:
            if call.announce_first:
                self._batch.after_commit(
                    functools.partial(self._launch, sid, runtime, call, parent), time.monotonic()
                )
            else:
                self._launch(sid, runtime, call, parent)

    def _launch(
        self, sid: str, runtime: Runtime, call: LiveCall, parent: Context | None = None
    ) -> None:
        res = self._residents.get(sid)
        if res is None or res.runtime is not runtime:
            return  # revoked, evicted or rebuilt meanwhile: the new owner decides
        task = asyncio.get_running_loop().create_task(
            self._performer.perform(sid, runtime, call, parent)
        )
        self._launched += 1
        self._tasks[task] = sid
        task.add_done_callback(lambda t: self._tasks.pop(t, None))

    def _drain_completions(self) -> None:
        served = 0
        while self._completions:
            served += 1
            if served % 64 == 0:  # as in _poll: keep the commit in flight moving
                self._serve_delivery_reports()
            done = self._completions.popleft()
            res = self._residents.get(done.session_id)
            if res is None or res.runtime is not done.runtime:
                continue  # stale: the run moved or was rebuilt; its journal decides
            res.last_active = time.monotonic()
            # The last snapshot applied is the runtime's current state (every step that
            # changes it carries records); it names the call in flight.
            previous = self._parts[res.partition].sessions[done.session_id]
            mark = self._batch.mark()
            self._trace = done.trace  # the outcome's records carry the effect's span
            try:
                self._complete(done, res, previous)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._poisoned(done.session_id, res.partition, previous, mark, exc, "completion")
            finally:
                self._trace = None

    def _complete(self, done: Completion, res: Resident, previous: SessionSnapshot) -> None:
        if done.outcome.verdict is Verdict.IN_DOUBT:
            # The outcome is unknown (timeout after send, 5xx): the core runs the declared
            # recovery (retry, probe, operator task) at the same era and slot — no rebuild, so
            # a checkpointed run does not restart an era and re-pay what followed its checkpoint.
            step = res.runtime.in_doubt(done.call.call_seq, now_ms=self._wall_ms())
        else:
            step = res.runtime.complete(
                done.call.call_seq,
                # A tool's declared label (trust, sensitivity) rides with its result.
                to_outcome(done.outcome, getattr(self._tools.get(done.call.target), "label", None)),
                now_ms=self._wall_ms(),
            )
        if step.rejected is not None:
            log.warning("live call outcome not applied: %s", step.rejected)
            return
        self._apply(done.session_id, res.partition, res.runtime, step, previous=previous)
