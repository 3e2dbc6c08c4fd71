"""Eras: a checkpointed run restored in a new era, and what carries across eras.

A new era starts from the last checkpoint (RUN_RESTORED). Its tool, approval, case, deadline
and signal calls whose (family, name, witness) an earlier era recorded are served from that
record (the side-effect log), so a recorded mutation is never applied twice. An announce
with no outcome becomes a carried doubt (EFFECT_IN_DOUBT); an unanswered request (a task, a
case command) stays open and is *adopted* when the new era asks it again, so a person is
asked once (see "Asked once" in the package docstring).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping

from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.table import CROSS_ERA, LOGGED
from runplane.core.engine.tasks import withdraw_open
from runplane.core.engine.values import OpenRequest, RequestKind
from runplane.core.engine.vocab import SUSPEND, Resolution, Slot, Wait, WaitKind
from runplane.wire import (
    JournalKind,
    ParkKind,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
)

__all__ = [
    "adopt",
    "from_prior_era",
    "new_era",
    "note_early",
    "set_open",
    "side_effect_log",
]


def new_era(run: Run, snapshot: SessionSnapshot) -> None:
    """Begin era N+1 of a checkpointed run from its last checkpoint."""
    rec = run.rec
    old = rec.era
    run.era = rec.era = old + 1
    # Some families are logged but serve their entries themselves (commissions, in ready
    # order: a branch's outcome is held), never through ``from_prior_era``.
    logged = side_effect_log(rec.results, rec.era, frozenset(LOGGED))
    run.prior = {key: deque(entries) for key, entries in logged.items()}
    found, run.in_flight = run.in_flight, None
    if found is not None:
        # The durable fact, journaled before anything of the new era: this announce has no
        # outcome. It joins the doubts carried in the snapshot, so a crash before the new
        # era re-reaches the call cannot turn it into a fresh live call (issue 3).
        rec.seal(
            JournalKind.EFFECT_IN_DOUBT,
            era=found.era,
            call_seq=found.call_seq,
            family=found.family,
            name=found.name,
            witness=found.witness,
            attrs={"recovery": str(found.recovery), "found": "restore", "origin": found.origin},
        )
        run.doubts.append(found)
    parked = run.parked
    if parked is not None and parked.kind is ParkKind.OPERATOR:
        # Operator tasks are not carried: the new era runs the call's recovery again (a probe
        # may answer now) and asks anew if it must. The old question is withdrawn.
        withdraw_open(run, f"superseded: run restored in era {rec.era}", carried=False)
    # The open request (task or case command) stays in ``run.open``: the new era adopts it
    # when it issues the same request again.
    run.parked = None
    run.status = RunStatus.RUNNING
    run.restored = json.loads(snapshot.checkpoint_json) if snapshot.checkpoint_json else None
    rec.clock_ms = rec.now  # a fresh era's first observation is the restore's stamp
    run.era_started_ms = rec.now
    attrs = {"from_era": str(old), "checkpoint": "yes" if run.restored is not None else "no"}
    if run.doubts:
        attrs["in_doubt"] = ",".join(d.origin for d in run.doubts)
    rec.seal(JournalKind.RUN_RESTORED, attrs=attrs)


def from_prior_era(run: Run, slot: Slot) -> Resolution | None:
    """Serve ``slot`` from the side-effect log when an earlier era recorded the same call."""
    effect, _, witness = slot
    if effect.family not in CROSS_ERA:
        return None
    queue = run.prior.get((effect.family, effect.name, witness))
    if not queue:
        return None
    old = queue.popleft()
    value = json.loads(old.value_json) if old.ok and old.value_json is not None else None
    entry = run.rec.result(
        slot,
        JournalKind.EFFECT_RECORDED,
        value=value,
        error=None if old.ok else old.error,
        attempts=old.attempts,
        label=old.label,
        attrs={"reconstructed_from": f"{old.era}/{old.call_seq}"},
    )
    return serve(run.rec, effect, entry)


def adopt(run: Run, carried: OpenRequest, slot: Slot) -> Resolution:
    """The new era asks what an earlier era already asked and nobody answered yet: wait on
    that task / request instead of sending it again (a person is asked once)."""
    if carried.kind is RequestKind.TASK:
        kind, park, status, wait = (
            ParkKind.TASK,
            f"task:{carried.ref}",
            RunStatus.AWAITING_HUMAN,
            WaitKind.APPROVAL,
        )
    else:
        kind, park, status, wait = (
            ParkKind.CASE_REPLY,
            f"case:{carried.ref}",
            RunStatus.PARKED,
            WaitKind.CASE,
        )
    attrs = {"parked_on": park, "carried_from": f"{carried.era}/{carried.call_seq}"}
    if carried.kind is RequestKind.TASK:
        attrs["task_id"] = carried.ref
    run.rec.at(JournalKind.RUN_PARKED, slot, attrs)
    run.park(kind, carried.ref, slot.call_seq, status)
    run.waiting = Wait(wait, slot, value=carried.value)
    return SUSPEND


def note_early(run: Run, carried: OpenRequest, entry: ResultEntry) -> None:
    """An answer journaled at a carried request's own slot before the new era asked again:
    the side-effect log serves it when the era does."""
    key = (carried.family, carried.name, carried.witness)
    run.prior.setdefault(key, deque()).append(entry)


def set_open(run: Run, request: OpenRequest) -> None:
    """Remember the request now waited on; a carried task it supersedes is withdrawn."""
    # Nobody waits for a carried task any more; an unwithdrawn one would sit on the worklist.
    withdraw_open(run, f"superseded: era {run.era} asked {request.name}", waited=False)
    run.open = request


def side_effect_log(
    results: Mapping[tuple[int, int], ResultEntry],
    before_era: int,
    families: frozenset[str] | set[str] = CROSS_ERA,
) -> dict[tuple[str, str, str], list[ResultEntry]]:
    """Each distinct recorded call of the eras before ``before_era``, per (family, name,
    witness), in the order the calls were first made.

    An era serves its i-th call of a key from the log's i-th entry and records that serve as
    an entry of its own (a reconstruction); only calls beyond the log are new. So, era by era,
    the i-th entry of a key extends the log only when i is past its end — counting the
    reconstructions again would serve a stale copy to a later call with the same witness
    (two reads of the case after two restores)."""
    log: dict[tuple[str, str, str], list[ResultEntry]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    era = -1
    for (entry_era, _seq), entry in sorted(results.items()):
        if entry_era >= before_era:
            break
        if entry_era != era:
            era, seen = entry_era, {}
        if entry.family not in families:
            continue
        key = (entry.family, entry.name, entry.request_witness)
        index = seen.get(key, 0)
        seen[key] = index + 1
        entries = log.setdefault(key, [])
        if index >= len(entries):
            entries.append(entry)
    return log
