"""Signal family: updates — a signal that answers (``runplane.core.updates``).

An update reaches the run as the reserved signal ``runplane.update/<name>`` whose
``signal_id`` is the update id. In order:

1. **Once per id.** The run's part ``UPDATES`` holds, per update id it accepted (newest
   ``MAX_UPDATE_IDS``), where its answer is in the result journal (``(era, call_seq)``, or none
   yet). An id answered already is answered again with the *recorded* answer — never handled
   twice; one accepted and not yet answered changes nothing (its answer is still to come).
2. **The validator**, pure, before anything is journaled: refused (or too large, or the buffer
   full), the run answers with the reason (``UpdateAnswer``, ``refused`` set) and journals
   nothing — no record, no slot, no part changed.
3. **Accepted**: delivered like a signal (``signals.deliver``: to a ``ctx.wait_update`` of that
   name, else buffered and journaled ``SIGNAL_RECEIVED``), its id remembered unanswered.

``ctx.answer`` (op ``ANSWER``) records the answer at its slot and sends it: the command
commits in the step that journals it, so the answer leaves exactly when the run's journal
says it was given; a replay serves the slot and sends nothing. When the run ends, every
update it accepted and never answered is answered ``ended`` (``unanswered``).
"""

from __future__ import annotations

import json
from typing import Any, Final

from runplane.core.engine.decode import serve
from runplane.core.engine.signals import deliver
from runplane.core.engine.state import Run
from runplane.core.engine.table import Part
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot
from runplane.core.updates import refusal, update_name
from runplane.wire import ErrorInfo, JournalKind, Signal, UpdateAnswer

__all__ = ["MAX_UPDATE_IDS", "UPDATES", "answer", "claims", "on_update", "unanswered"]

# How many accepted update ids a run remembers (newest kept): its idempotency window.
MAX_UPDATE_IDS: Final = 512
_OPEN: Final = -1  # call_seq of an update accepted and not answered yet

Seen = tuple[tuple[str, int, int], ...]  # (update id, era, call_seq of its answer or _OPEN)


def _encode(seen: Seen) -> str:
    return json.dumps([list(s) for s in seen], separators=(",", ":"))


def _decode(text: str) -> Seen:
    return tuple((str(i), int(e), int(c)) for i, e, c in json.loads(text))


UPDATES: Final[Part[Seen]] = Part("updates", (), encode=_encode, decode=_decode)


def claims(run: Run, signal: Signal) -> bool:
    """Is this Signal an update? (By its reserved name.)"""
    return update_name(signal.name) is not None


def on_update(run: Run, signal: Signal) -> Resolution | Rejected:
    """An update on the inbox (see the module docstring)."""
    name = update_name(signal.name) or ""
    update_id = signal.signal_id
    if update_id is None:  # every sender mints one (runplane.runs.operate): a forged record
        return Rejected(f"update {name!r} carries no update id", "update_without_id")
    seen = next((s for s in UPDATES.of(run) if s[0] == update_id), None)
    if seen is not None:
        if seen[2] != _OPEN:
            entry = run.rec.results.get((seen[1], seen[2]))
            if entry is not None:
                _send(run, signal, name, answer_json=entry.value_json)
        return SUSPEND  # handled once already (or still being handled): nothing again
    refused = _refusal(run, signal, name)
    if refused is not None:
        _send(run, signal, name, refused=refused)
        return SUSPEND  # no record, no slot, no part: the journal never saw it
    delivered = deliver(run, signal)
    if isinstance(delivered, Rejected):  # the buffer is full: nothing was kept
        _send(run, signal, name, refused=(delivered.kind or "refused", delivered.reason))
        return SUSPEND
    UPDATES.put(run, (*UPDATES.of(run), (update_id, run.era, _OPEN))[-MAX_UPDATE_IDS:])
    return delivered


def _refusal(run: Run, signal: Signal, name: str) -> tuple[str, str] | None:
    limit = run.limits.max_signal_bytes
    if len(signal.payload_json.encode("utf-8", "surrogatepass")) > limit:
        return "too_large", f"update {name!r} is over {limit} bytes"
    try:
        payload = json.loads(signal.payload_json)
    except ValueError:
        return "invalid", f"update {name!r}: the payload is not JSON"
    return refusal(run.spec.updates.get(name), name, payload)


def answer(run: Run, slot: Slot) -> Resolution:
    """``ctx.answer``: record the answer at its slot and send it to the caller — once per
    update; an update not accepted by this run, or answered already, is the agent's error
    (recorded at the slot, so a replay raises it again)."""
    request: dict[str, Any] = slot.effect.request
    update_id = str(request.get("update_id"))
    seen = UPDATES.of(run)
    at = next((i for i, s in enumerate(seen) if s[0] == update_id), None)
    if at is None or seen[at][2] != _OPEN:
        why = "was answered already" if at is not None else "is not an update this run accepted"
        error = ErrorInfo(
            type="UpdateNotOpen", message=f"update {update_id!r} {why}", retryable=False
        )
        return serve(
            run.rec, slot.effect, run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error)
        )
    entry = run.rec.result(
        slot,
        JournalKind.EFFECT_RECORDED,
        value=request.get("answer"),
        attrs={"update_id": update_id},
    )
    if entry.ok:
        UPDATES.put(run, (*seen[:at], (update_id, run.era, slot.call_seq), *seen[at + 1 :]))
        run.rec.out.commands.append(
            UpdateAnswer(
                session_id=run.session_id,
                update_id=update_id,
                name=slot.effect.name.removeprefix("answer:"),
                answer_json=entry.value_json,
                answered_ms=run.rec.now,
            )
        )
    return serve(run.rec, slot.effect, entry)


def unanswered(run: Run) -> list[UpdateAnswer]:
    """The run ended: an answer, refused ``ended``, to every update it accepted and never
    answered (buffered, or taken and not answered), so no caller waits for the end of its
    timeout. Sent in the step that journals the end."""
    names = {s.signal_id: s.name for s in run.pending}
    return [
        UpdateAnswer(
            session_id=run.session_id,
            update_id=update_id,
            name=update_name(names.get(update_id, "")) or "",
            refused="ended",
            reason=f"run {run.session_id} ended ({run.status.value}) before answering",
            answered_ms=run.rec.now,
        )
        for update_id, _era, call_seq in UPDATES.of(run)
        if call_seq == _OPEN
    ]


def _send(
    run: Run,
    signal: Signal,
    name: str,
    *,
    answer_json: str | None = None,
    refused: tuple[str, str] | None = None,
) -> None:
    run.rec.out.commands.append(
        UpdateAnswer(
            session_id=run.session_id,
            update_id=str(signal.signal_id),
            name=name,
            answer_json=answer_json,
            refused=None if refused is None else refused[0],
            reason=None if refused is None else refused[1],
            answered_ms=run.rec.now,
        )
    )
