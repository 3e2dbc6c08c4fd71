"""The cases service's processor handler: one command in, the case and its answers out.

Pure apart from counting metrics: ``handle`` reads the case from the restored ``cases``
table, folds the command in with :func:`services.cases.decide.evaluate`, and returns the
emits the shared transactional processor commits together with the input offset:

- the new CaseRecord on ``cases`` (when anything changed, including a remembered answer),
- the CaseReply on ``runs.inbox`` (key = the asking run's session) when ``reply_to`` is set,
- on the first breach of an obligation, the sealed sweep run on ``journal`` and the
  follow-up AdmissionRequest on ``admission`` (see :mod:`services.cases.breach`).

Delivery guarantee: exactly once per command, by the processor's transaction (outputs, table
change and offset commit together). A command whose key is not its case id, or a record that
is not a case command, is bad input: ``WireError`` → the processor dead-letters it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import (
    BreachDeadline,
    CancelDeadline,
    CaseRecord,
    CloseCase,
    GetCaseState,
    MeetDeadline,
    PutCaseState,
    RegisterDeadline,
    WarnDeadline,
)
from services.cases import metrics
from services.cases.breach import followup, sweep_run
from services.cases.decide import OPEN_STATUSES, CaseCommand, evaluate, op_of
from services.cases.topology import TABLE, TABLES
from services.cases.warning import DEFAULT_WARN_ROLE, warning

__all__ = ["COMMAND_TYPES", "CasesHandler", "emits_for"]

COMMAND_TYPES = (
    GetCaseState,
    PutCaseState,
    RegisterDeadline,
    MeetDeadline,
    CancelDeadline,
    WarnDeadline,
    BreachDeadline,
    CloseCase,
)


def emits_for(
    case: CaseRecord | None,
    command: CaseCommand,
    now_ms: int,
    *,
    warn_role: str = DEFAULT_WARN_ROLE,
) -> tuple[list[Emit], str, str | None]:
    """The emits for one command on ``case``, with the outcome and the transition (pure)."""
    d = evaluate(case, command, now_ms)
    emits: list[Emit] = []
    if d.case is not None:
        emits.append(Emit(TABLE, command.case_id, d.case))
    if command.reply_to:
        emits.append(Emit("runs.inbox", command.reply_to, d.reply))
    if d.transition == "breached":
        assert isinstance(command, BreachDeadline) and d.obligation is not None
        assert d.case is not None
        for record in sweep_run(d.case, d.obligation, command, now_ms):
            emits.append(Emit("journal", record.session_id, record))
        request = followup(d.case, d.obligation, command, now_ms)
        if request is not None:
            emits.append(Emit("admission", request.admission_key, request))
    if d.transition == "warned":
        assert isinstance(command, WarnDeadline) and d.obligation is not None
        assert d.case is not None
        records, task = warning(d.case, d.obligation, command, now_ms, default_role=warn_role)
        emits.extend(Emit("journal", r.session_id, r) for r in records)
        emits.append(Emit("tasks.commands", task.task_id, task))
    return emits, d.outcome, d.transition


class CasesHandler:
    """The processor handler of the cases service (``tables``: the ``cases`` table)."""

    tables: Mapping[str, str] = TABLES

    def __init__(self, gauge_every_ms: int = 5_000, warn_role: str = DEFAULT_WARN_ROLE) -> None:
        self._gauge_every_ms = gauge_every_ms
        self._warn_role = warn_role
        self._last_gauge = -gauge_every_ms

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        command = msg.value
        if command is None:
            return []  # a tombstone on a command topic asks for nothing
        if not isinstance(command, COMMAND_TYPES):
            raise WireError(f"{type(command).__name__} is not a case command")
        if command.case_id != msg.key:
            # The table is partitioned by key: a command filed under another key would be
            # applied on the wrong partition's copy of the case.
            raise WireError(f"record key {msg.key!r} is not its case_id {command.case_id!r}")
        case = state.get(TABLE, command.case_id)
        if case is not None and not isinstance(case, CaseRecord):
            raise WireError(f"table row for {command.case_id!r} is not a CaseRecord")
        emits, outcome, transition = emits_for(case, command, now_ms, warn_role=self._warn_role)
        metrics.COMMANDS.labels(op_of(command), outcome).inc()
        if transition == "warned":
            metrics.WARNINGS.inc()
        elif transition == "breached":
            metrics.BREACHES.inc()
        return emits

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        """Refresh the open-obligations gauge now and then; emits nothing."""
        mono = int(time.monotonic() * 1000)
        if mono - self._last_gauge >= self._gauge_every_ms:
            self._last_gauge = mono
            metrics.OBLIGATIONS_OPEN.set(count_open(state))
        return []


def count_open(state: State) -> int:
    total = 0
    for _, case in state.items(TABLE):
        if isinstance(case, CaseRecord):
            total += sum(1 for ob in case.obligations if ob.status in OPEN_STATUSES)
    return total
