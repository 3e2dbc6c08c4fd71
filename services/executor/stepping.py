"""A run's steps: the engine's runtime started or rebuilt, every step applied into the outbox,
the live calls it asks for launched, and their outcomes drained back into the runtime.

A step leaves the engine through ``apply_step`` into a ``RunSink`` (the outbox and the run
table); the live calls it asks for are launched at once, or after the batch commits when their
announce must be durable first (announce-before-act) or the step records a paid outcome (a
model turn's, which a crash during the calls would otherwise lose: ``Step.performs_after_commit``). A call's outcome comes back as a
``Completion`` on the ``Performer``'s queue and is drained on the loop thread, where the
engine turns it into the next step. What raises while a run is served fails that run
(``RunEnds.poisoned``), never the executor.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import Context

from runplane.core import AgentRegistry, AgentSpec, LiveCall, Runtime, Step, UnknownCapability
from runplane.core.engine import apply_step
from runplane.core.versions import VersionNotDeployed
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.serving.tracing import current_context
from runplane.wire import SessionSnapshot, StartRun
from services.executor.calls import Completion, Performer, to_outcome
from services.executor.committer import GroupCommit
from services.executor.ending import RunEnds
from services.executor.live import CallStatus
from services.executor.metrics import ExecutorMetrics
from services.executor.outbox import Outbox, RunSink
from services.executor.policy import EngineOptions
from services.executor.state import Resident, RunTable

__all__ = ["StepApplier"]

log = logging.getLogger("services.executor.executor")


class StepApplier:
    """Runtimes in, steps out: into the outbox, live calls out and their outcomes back."""

    def __init__(
        self,
        table: RunTable,
        outbox: Outbox,
        ends: RunEnds,
        *,
        registry: AgentRegistry,
        engine: EngineOptions,
        performer: Performer,
        tools: Mapping[str, Any],
        group: GroupCommit,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._outbox = outbox
        self._ends = ends
        self._registry = registry
        self._engine = engine
        self._performer = performer
        self._tools = tools
        self._group = group
        self._metrics = metrics
        self._wall_ms = wall_ms
        # Outcomes of live calls, filled by the performer's tasks, drained here on the loop.
        self.completions = performer.completions
        self.tasks: dict[asyncio.Task[None], str] = {}  # live calls in flight, by run
        self.launched = 0  # calls launched this loop turn (the loop resets it)

    # ------------------------------------------------------------------ runtimes
    def start(self, spec: AgentSpec, start: StartRun, p: int, now_ms: int) -> None:
        """Start a new run: its first step applied, its runtime resident."""
        runtime, step = Runtime.start(spec, start, now_ms=now_ms, **self._engine)
        self._metrics.runs_started.inc()
        self._table.residents[start.session_id] = Resident(runtime, p, time.monotonic())
        self.apply(start.session_id, p, runtime, step)

    def rebuild(self, run_id: str, p: int, snap: SessionSnapshot) -> Resident | None:
        """Bring a non-resident run back by replaying its result journal (None: no deployed
        agent serves it, or the rebuild itself ended it)."""
        try:
            spec = self._registry.spec_for(snap.capability, snap.agent_version)
        except (UnknownCapability, VersionNotDeployed) as exc:
            log.error("cannot rebuild run %s (%s): %s", run_id, snap.capability, exc)
            return None
        results = self._table.parts[p].results_of(run_id)
        runtime, step = Runtime.restore(spec, snap, results, now_ms=self._wall_ms(), **self._engine)
        self._metrics.replays.inc()
        self._metrics.replay_length.observe(step.replayed)
        res = Resident(runtime, p, time.monotonic())
        self._table.residents[run_id] = res
        self.apply(run_id, p, runtime, step)
        return res if not runtime.ended else None

    # ------------------------------------------------------------------ steps
    def apply(self, run_id: str, p: int, runtime: Runtime, step: Step) -> None:
        """Apply ``step`` of ``runtime`` and start its calls."""
        # The agent's progress notes go out now, not with the batch: they are ephemeral.
        self._outbox.progress(run_id, runtime.era, runtime.take_progress())
        sink = RunSink(self._outbox, self._table, run_id, p)
        if apply_step(step, sink):
            return
        # The step's trace context, for the spans of the calls it requested (None: untraced).
        parent = current_context() if self._outbox.trace else None
        for call in step.live_calls:
            if step.performs_after_commit(call):
                self._outbox.after_commit(
                    functools.partial(self._launch, run_id, runtime, call, parent), time.monotonic()
                )
            else:
                self._launch(run_id, runtime, call, parent)

    # ------------------------------------------------------------------ live calls
    def _launch(
        self, run_id: str, runtime: Runtime, call: LiveCall, parent: Context | None = None
    ) -> None:
        res = self._table.residents.get(run_id)
        if res is None or res.runtime is not runtime:
            return  # revoked, evicted or rebuilt meanwhile: the new owner decides
        task = asyncio.get_running_loop().create_task(
            self._performer.perform(run_id, runtime, call, parent)
        )
        self.launched += 1
        self.tasks[task] = run_id
        task.add_done_callback(lambda t: self.tasks.pop(t, None))

    def drain(self) -> None:
        """Hand every finished live call's outcome to its runtime and apply the step."""
        served = 0
        while self.completions:
            served += 1
            if served % 64 == 0:  # as for inbox messages: keep the commit in flight moving
                self._group.serve_delivery_reports()
            done = self.completions.popleft()
            res = self._table.residents.get(done.session_id)
            if res is None or res.runtime is not done.runtime:
                continue  # stale: the run moved or was rebuilt; its journal decides
            res.last_active = time.monotonic()
            # The last snapshot applied is the runtime's current state (every step that
            # changes it carries records); it names the call in flight.
            previous = self._table.parts[res.partition].sessions[done.session_id]
            mark = self._outbox.mark()
            self._outbox.trace = done.trace  # the outcome's records carry the effect's span
            try:
                self._complete(done, res)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._ends.poisoned(
                    done.session_id, res.partition, previous, mark, exc, "completion"
                )
            finally:
                self._outbox.trace = None

    def _complete(self, done: Completion, res: Resident) -> None:
        if done.outcome.status is CallStatus.IN_DOUBT:
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
        self.apply(done.session_id, res.partition, res.runtime, step)

    def cancel(self, numbers: set[int]) -> None:
        """Cancel the live calls of runs on the partitions ``numbers`` (their outcomes would
        be stale: the partition's next owner decides from the journal)."""
        for task, run_id in list(self.tasks.items()):
            if self._table.partition_of(run_id) in numbers:
                task.cancel()
                del self.tasks[task]

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
