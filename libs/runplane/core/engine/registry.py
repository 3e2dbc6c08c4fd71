"""The effect families, in one table: which handler serves each op on a fresh slot, and
which inbox event each family answers. Adding a family is one module and one row here (see
"Adding an effect family" in docs/contracts.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.core.effect import Op
from runplane.core.engine import (
    approvals,
    cases,
    closing,
    commission,
    fanout,
    local,
    panels,
    release,
    signals,
    successor,
    timers,
    tools,
)
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Rejected, Resolution, Slot
from runplane.wire import CaseReply, Signal, TaskDecision, Wake

__all__ = ["FAMILIES", "HANDLERS", "INBOX", "Family", "Handler", "InboxHandler"]

Handler = Callable[[Run, Slot], Resolution]
# Takes the run and one inbox event of the type it is registered for.
InboxHandler = Callable[[Run, Any], Resolution | Rejected]


@dataclass(frozen=True)
class Family:
    """One effect family: the ops it serves and the inbox events that answer it."""

    name: str
    ops: Mapping[Op, Handler]
    inbox: Mapping[type, InboxHandler]


FAMILIES: Final = (
    # Generations and tools, performed by the executor; calls in doubt recover in ``doubt``.
    Family("live", {Op.LIVE: tools.live}, {}),
    # Approvals; a TaskDecision also carries operator verdicts on calls in doubt.
    Family("approvals", {Op.APPROVAL: approvals.approval}, {TaskDecision: approvals.on_decision}),
    Family(
        "cases",
        {
            Op.CASE_GET: cases.case_command,
            Op.CASE_PUT: cases.case_command,
            Op.DEADLINE: cases.deadline,
            Op.DEADLINE_MEET: cases.deadline,
            Op.DEADLINE_CANCEL: cases.deadline,
        },
        {CaseReply: cases.on_case_reply},
    ),
    # Closing the run's case (refused while an obligation is open), answered like cases.
    Family("closing", {Op.CASE_CLOSE: closing.close_case}, {}),
    Family("local", {Op.OBSERVE: local.observe, Op.CHECKPOINT: local.checkpoint}, {}),
    # Operating a run: signals, durable timers; a Wake also carries a cancel (engine.cancel).
    Family("signals", {Op.SIGNAL: signals.wait_signal}, {Signal: signals.on_signal}),
    Family("timers", {Op.SLEEP: timers.sleep}, {Wake: timers.on_wake}),
    Family("successor", {Op.CONTINUE_AS_NEW: successor.continue_as_new}, {}),
    # Panels of people: a task per seat. Their TaskDecisions come here first; every other
    # one goes on to approvals.on_decision (this row is later, so it serves TaskDecision).
    Family("panels", {Op.PANEL: panels.panel}, {TaskDecision: panels.on_decision}),
    # ctx.release: granted by policy, or an approval task (its decision comes as TaskDecision).
    Family("release", {Op.RELEASE: release.release}, {}),
    # Fan-out branches and their join; a child's result arrives as a signal (commission hands
    # every other signal to the signal family's handler). Last: the later row serves Signal.
    Family(
        "fanout", {Op.BRANCH: fanout.branch, Op.JOIN: fanout.join}, {Signal: commission.on_signal}
    ),
)

HANDLERS: Final[Mapping[Op, Handler]] = {op: h for f in FAMILIES for op, h in f.ops.items()}
INBOX: Final[Mapping[type, InboxHandler]] = {t: h for f in FAMILIES for t, h in f.inbox.items()}
