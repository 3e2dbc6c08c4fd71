"""Applying a Step: the one order in which a step's decisions leave the engine.

The executor (into its group-commit batch) and ``runplane.testing.Driver`` (into memory) both
carry out steps through ``apply_step``, so what a test of an agent sees committed is what the
executor commits: journal records, then result entries, then commands for other services, then
the snapshot (only when the step changed the chain or the results), and — when the step ended
the run — the end itself. A step that ends a run parked on a task already carries that task's
withdrawal (``tasks.withdraw_open`` serves every end) or its decision. Live calls are not
applied here: when to perform them (now, or after the step is durable) is the
carrier's commit discipline, not the step's content.
"""

from __future__ import annotations

from typing import Protocol

from runplane.core.engine.step import Command, Step
from runplane.wire import JournalRecord, ResultEntry, RunStatus, SessionSnapshot

__all__ = ["StepSink", "apply_step"]


class StepSink(Protocol):
    """Where one run's step goes. Each method receives the step's items in order."""

    def put_records(self, records: tuple[JournalRecord, ...]) -> None: ...

    def put_results(self, entries: tuple[ResultEntry, ...]) -> None: ...

    def put_commands(self, commands: tuple[Command, ...]) -> None: ...

    def put_snapshot(self, snapshot: SessionSnapshot) -> None: ...

    def run_ended(self, status: RunStatus) -> None: ...


def apply_step(step: Step, sink: StepSink) -> bool:
    """Carry ``step`` out into ``sink``; True when it ended the run."""
    if step.records:
        sink.put_records(step.records)
    if step.results:
        sink.put_results(step.results)
    if step.commands:
        sink.put_commands(step.commands)
    if step.records or step.results:
        sink.put_snapshot(step.snapshot)
    if step.end is None:
        return False
    sink.run_ended(step.end)
    return True
