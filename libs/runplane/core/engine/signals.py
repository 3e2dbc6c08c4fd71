"""Effect family: signals — ``ctx.wait_signal(name, timeout=…)`` and the Signal inbox event.

``wait_signal`` takes the next buffered signal of that name or parks until one arrives; with
a ``timeout`` the wait is bounded (``Run.timeout_at``, ``Run.bound_by``), and past it the wait
records ``WaitTimedOut`` at its slot instead.

A signal is accepted once per ``signal_id``: the ids of the last ``MAX_SIGNAL_IDS`` accepted
signals are the family's part of the run (``SIGNAL_IDS``), and a redelivery (a sender's retry, a
duplicate produce) changes nothing — no record, no second delivery. A signal comes from
outside the platform: its value is labelled untrusted at the source (``labels.at_source``)
unless the deployment policy trusts its sender for it (``trusted_signals``: an authenticated
principal, a signal name, or both; the record's ``trusted_by`` names the policy digest) and,
when the sender was authenticated, its provenance names ``principal/<sender>``; the journal
records who sent it (``sent_by``) and its id.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

from runplane.core.effect import Op
from runplane.core.engine import bounds, cancel
from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.table import Part
from runplane.core.engine.vocab import (
    SUSPEND,
    Rejected,
    Resolution,
    Slot,
    Wait,
    WaitKind,
)
from runplane.core.labels import at_source
from runplane.core.updates import Update
from runplane.wire import (
    JournalKind,
    Label,
    ParkKind,
    ResultEntry,
    RunStatus,
    Sensitivity,
    Signal,
    Trust,
)

__all__ = ["MAX_SIGNAL_IDS", "SIGNAL_IDS", "deliver", "on_signal", "wait_signal"]

# How many accepted signal ids a run remembers (newest kept): the deduplication window.
MAX_SIGNAL_IDS: Final = 1024

# The signal family's part: the ids of the signals accepted (bounded, newest last). Its
# text is plain JSON (json.dumps, in C: up to MAX_SIGNAL_IDS ids, every snapshot), not hashed.
SIGNAL_IDS: Final[Part[tuple[str, ...]]] = Part(
    "signal_ids",
    (),
    encode=lambda ids: json.dumps(ids, ensure_ascii=False, separators=(",", ":")),
    decode=lambda text: tuple(str(i) for i in json.loads(text)),
    read_old=lambda snapshot: tuple(snapshot.signal_ids),
    write_old=lambda ids: {"signal_ids": ids},
)


def wait_signal(run: Run, slot: Slot) -> Resolution:
    name = slot.effect.name
    for i, signal in enumerate(run.pending):
        if signal.name == name:
            del run.pending[i]
            return serve(run.rec, slot.effect, _record_signal(run, slot, signal))
    attrs = {"parked_on": f"signal:{name}"}
    due = run.timeout_at(slot.effect.request.get("timeout"))
    if due is not None and due <= run.now:
        return run.time_out(slot, due)  # a timeout already past: no park
    run.park(ParkKind.SIGNAL, name, slot.call_seq, RunStatus.PARKED)
    if due is not None:
        attrs.update(run.bound_by(due))
    run.rec.seal(JournalKind.RUN_PARKED, call_seq=slot.call_seq, attrs=attrs)
    run.waiting = Wait(WaitKind.SIGNAL, slot)
    return SUSPEND


def on_signal(run: Run, signal: Signal) -> Resolution | Rejected:
    """A signal on the inbox: resumes the run waiting for it, or is buffered until it asks;
    one already accepted under the same id changes nothing; ``runplane.cancel`` is a cancel."""
    if signal.signal_id is not None and signal.signal_id in SIGNAL_IDS.of(run):
        return SUSPEND  # a redelivery: accepted once already
    if len(signal.payload_json.encode("utf-8", "surrogatepass")) > run.limits.max_signal_bytes:
        return Rejected(
            f"signal {signal.name!r} is over {run.limits.max_signal_bytes} bytes",
            "signal_too_large",
        )
    if signal.name == cancel.CANCEL_SIGNAL:
        answer = cancel.on_request(run, signal)
        if not isinstance(answer, Rejected):
            _remember(run, signal)
        return answer
    return deliver(run, signal)


def deliver(run: Run, signal: Signal) -> Resolution | Rejected:
    """An accepted signal (or update, ``engine.updates``): resumes the run waiting for it by
    name, or is buffered until it asks (refused when the buffer is full)."""
    wait = run.waiting
    if wait is not None and wait.kind is WaitKind.SIGNAL and wait.slot.effect.name == signal.name:
        _remember(run, signal)
        run.waiting = None
        run.unpark()
        return serve(run.rec, wait.slot.effect, _record_signal(run, wait.slot, signal))
    refused = bounds.refuse_buffering(run, signal)
    if refused is not None:
        return refused
    # Not awaited yet: keep it (in the snapshot) for the wait_signal that will consume it.
    _remember(run, signal)
    run.pending.append(signal)
    run.rec.seal(
        JournalKind.SIGNAL_RECEIVED,
        attrs={**_who(signal), "signal": signal.name, "buffered": "true"},
    )
    return SUSPEND


def _remember(run: Run, signal: Signal) -> None:
    if signal.signal_id is not None:
        # A new tuple, never one changed in place: a capture or a mark holds the old one.
        SIGNAL_IDS.put(run, (*SIGNAL_IDS.of(run), signal.signal_id)[-MAX_SIGNAL_IDS:])


def _who(signal: Signal) -> dict[str, str]:
    """The sender and id, journaled with the signal (only when the sender gave them, so the
    records of older signals are unchanged)."""
    who: dict[str, str] = {}
    if signal.signal_id is not None:
        who["signal_id"] = signal.signal_id
    if signal.sent_by is not None:
        who["sent_by"] = signal.sent_by
    return who


def _record_signal(run: Run, slot: Slot, signal: Signal) -> ResultEntry:
    try:
        payload = json.loads(signal.payload_json)
    except ValueError:
        payload = signal.payload_json  # not JSON: delivered as the raw text
    if slot.effect.op is Op.UPDATE:
        # An update: the agent gets its id and sender with the payload (``core.updates.Update``).
        payload = Update(
            str(signal.signal_id), slot.effect.request["update"], payload, signal.sent_by
        ).to_json()
    label = source = None
    attrs = {**_who(signal), "signal": signal.name}
    if signal.sent_by is not None:
        # Joined with the source label (untrusted): names the sender, never raises the trust.
        label = Label(
            trust=Trust.UNTRUSTED,
            sensitivity=Sensitivity.INTERNAL,
            provenance=(f"principal/{signal.sent_by}",),
        )
        if run.policy is not None and run.policy.for_agent(run.spec.capability).trusts_signal(
            signal.name, signal.sent_by
        ):
            # The deployment trusts this sender for this signal: trusted at the source, and
            # the provenance still names who sent it. Decided here, once: the label is in the
            # result journal, so a replay (or a changed policy) serves what was decided.
            label = replace(label, trust=Trust.TRUSTED)
            source = replace(
                at_source(slot.effect.family, slot.effect.name, run.spec.capability),
                trust=Trust.TRUSTED,
            )
            attrs["trusted_by"] = run.policy.digest
    return run.rec.result(
        slot, JournalKind.SIGNAL_RECEIVED, value=payload, label=label, attrs=attrs, source=source
    )
