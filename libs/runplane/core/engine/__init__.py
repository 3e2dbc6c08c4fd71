"""The replay engine: given a run's recorded history and one input, decide what happens next.

A ``Runtime`` is one run's live coroutine plus the state needed to extend its chain. It is
pure: it never reads a clock (every public method takes ``now_ms``), never performs a call,
never touches Kafka. Each public method returns a ``Step`` — the decisions the executor
carries out: journal records (already sealed and chained), result entries, commands for
other services, live calls to perform, the new snapshot.

Every effect the agent awaits takes the next ``call_seq`` of the era and goes through the
three-way branch:

1. slot (era, call_seq) in the result journal → **replay**: family, name and request witness
   must equal the record's, then the recorded value is returned (or the recorded failure
   re-raised). Any difference → the run is **quarantined** with a positioned diagnostic;
   the call is never answered.
2. slot announced but not recorded (``in_flight`` in the snapshot) → **in doubt**: the
   effect's declared recovery decides (retry / reconcile with the probe / operator task).
3. slot absent → **live**: the handler of the effect's kind runs (see ``registry.HANDLERS``).

Announce before act (``LiveCall.announce_first``): a live call emits EFFECT_ANNOUNCED in the
step that requests it. If its recovery is ``retry`` the executor may perform the call first
and commit the announce together with the outcome (a crash loses both and the call is made
again — harmless by declaration). For ``reconcile`` and ``requires_operator`` the executor
must commit the step *before* performing the call, so that a crash leaves an announce to be
found in doubt instead of an invisible applied effect.

Checkpointed runs are restored in a new era from their last checkpoint; in that era a tool,
approval, case or deadline call whose (family, name, witness) was recorded in an earlier era
is served from that record (the side-effect log), so a recorded mutation is never applied
twice; generations and observations are re-executed.

**Asked once.** A request sent to another service and not yet answered — an approval task,
a case command (state read/write, deadline register/meet/cancel) — is the run's
``OpenRequest``, persisted in the snapshot with its witness. A checkpointed restore does not
forget it: when the new era issues the same request again (same family, name and witness),
the run *adopts* it — parks on the old task id / request id, sends nothing, opens no second
task — so a person is asked once and the old task's decision resumes the run. An answer that
arrives before the new era has reached the request again is journaled at the request's own
slot (its era and call_seq) and served from there through the side-effect log. A carried
task the new era never asks for again is withdrawn (``CloseTask``) when superseded or when the
run ends. (Carrying is chosen over accepting a late decision for a re-opened task because the
latter still shows the same question twice on the worklist.) Operator tasks for calls in
doubt are not carried: the new era runs the call's recovery again (the old task is withdrawn).

**In doubt until resolved.** A checkpointed restore that finds an announced call with no
outcome journals EFFECT_IN_DOUBT for it (at the announce's own era and call_seq, before
RUN_RESTORED) and carries it in the snapshot (``doubts_json``) — not in memory — through any
number of further restores, until an era issues the same call (family, name, witness) again:
then its declared recovery runs (retry / probe / operator task) before it can be performed
live. A doubt the run never reaches again is named in its end record (``in_doubt``). An
operator's RETRY verdict is announced again and committed before the call is performed
(``announce_first``), so a crash after the act finds the call in doubt again instead of
re-reading the verdict and performing it once more; a repeated operator task for the same slot
gets a new id (``…/operator/<n>``).

The package, one module per responsibility (``registry`` is the table of effect families):

- ``values``: ``Outcome``, ``LiveCall``, ``InFlight``, ``OpenRequest``, ``ReplayReport``
- ``step``: ``Step``, ``Command``, ``Event``, ``Quarantine`` (what goes in and out of a run)
- ``vocab``: the closed ``Resolution`` union, ``WaitKind``/``Wait``, ``Slot``, ``Calendars``
- ``recorder``: ``Recorder``, the only place a record is sealed
- ``replay``: ``decide_slot``, the pure replay decision over one slot
- ``state``: ``Run``, one run's working state; ``driver``: the coroutine driver
- ``tools``, ``doubt``, ``approvals``, ``cases``, ``local``: one module per effect family
- ``signals``, ``timers``, ``successor`` (families), ``cancel`` and ``bounds`` (hooks on fresh
  slots), ``operated`` (the cancel request a snapshot carries): operating a run from outside
- ``eras``: checkpointed restores and what carries across eras; ``ends``: how a run ends
- ``runtime``: ``Runtime`` (the public API) and ``replay_history``
- ``apply``: ``apply_step``, the one order in which a step leaves the engine (executor, Driver)
- ``stranded``: a run no deployed version can serve, parked (its inbox records held) and
  released when its line is deployed again
- ``fanout``, ``commission``: a ready set dispatched at once and applied in ready order; a
  child run of another agent through admission (one Step may carry several live calls)
- ``replaytest``: replay testing, a recording replayed verify-only against the code
  importable now (``replay_recording``, ``replay_with``, ``attach_requests``)
"""

from __future__ import annotations

from runplane.core.engine.apply import StepSink, apply_step
from runplane.core.engine.asking import decision_identity_problem
from runplane.core.engine.ends import fail_from_snapshot, fail_unstartable
from runplane.core.engine.replaytest import (
    ReplayResult,
    RunReplay,
    attach_requests,
    replay_recording,
    replay_with,
)
from runplane.core.engine.runtime import Runtime, replay_history
from runplane.core.engine.step import TERMINAL, Command, Event, Quarantine, Step
from runplane.core.engine.stranded import (
    Stranded,
    can_hold,
    held_of,
    hold,
    park_stranded,
    release_stranded,
    strand_unstarted,
    stranded_of,
)
from runplane.core.engine.timeouts import timer_due
from runplane.core.engine.values import InFlight, LiveCall, OpenRequest, Outcome, ReplayReport
from runplane.core.engine.vocab import MAX_BUFFERED_SIGNALS, Calendars

__all__ = [
    "MAX_BUFFERED_SIGNALS",
    "TERMINAL",
    "Calendars",
    "Command",
    "Event",
    "InFlight",
    "LiveCall",
    "OpenRequest",
    "Outcome",
    "Quarantine",
    "ReplayReport",
    "ReplayResult",
    "RunReplay",
    "Runtime",
    "Step",
    "StepSink",
    "Stranded",
    "apply_step",
    "attach_requests",
    "can_hold",
    "decision_identity_problem",
    "fail_from_snapshot",
    "fail_unstartable",
    "held_of",
    "hold",
    "park_stranded",
    "release_stranded",
    "replay_history",
    "replay_recording",
    "replay_with",
    "strand_unstarted",
    "stranded_of",
    "timer_due",
]
