"""Replay testing: does the agent code importable now make the calls a recorded run made?

``replay_recording(spec, recording)`` replays a run's era 0 against ``spec`` without extending
it (the engine's verify-only replay: recorded results are served, nothing is performed) and
says ``OK`` or names the *first* divergence — the position (era, call_seq), what history holds
there and what the new code issued, both as JSON and as a unified diff. Pure: no I/O.

What counts, for a recording that ended (completed, failed, quarantined):
- a slot whose recorded call (family, name, request witness) differs from the issued one;
- the new code issuing a call where the history has none (past its end, or into a gap);
- the new code ending while the history has more calls, or ending otherwise (completing where
  the run failed, another output).
For a run in flight the history simply stops: the new code reaching its end is OK when the
call it issues there is the one announced or parked on (a run parked on an approval re-issues
the approval on restore), or when nothing was announced there yet.

Checkpointed runs are replayed in era 0 only; later eras begin from a checkpoint (the
``restored`` value) and carry their side-effect log, which a verify-only replay does not rebuild.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, cast

from runplane.core.agents import AgentRegistry, AgentSpec, UnknownCapability
from runplane.core.canonical import canonical_json
from runplane.core.chain import request_witness
from runplane.core.ctx import StepCtx
from runplane.core.effect import Effect
from runplane.core.engine.driver import launch
from runplane.core.engine.state import Run, run_from_snapshot
from runplane.core.engine.vocab import Calendars
from runplane.core.recording import CallKey, Recording, Slot, recorded_calls
from runplane.core.versions import VersionNotDeployed
from runplane.wire import JournalKind, RunStatus

__all__ = [
    "Call",
    "Divergence",
    "ReplayResult",
    "RunReplay",
    "attach_requests",
    "replay_recording",
    "replay_with",
]

_UNKNOWN: Any = object()  # a recorded request whose body the recording does not hold


class ReplayResult(StrEnum):
    """How replaying one recording against the code importable now came out."""

    OK = "ok"
    DIVERGED = "diverged"
    BROKEN = "broken"  # the recording itself does not verify: nothing was replayed
    MISSING = "missing"  # no agent for the run's capability in the code importable now


@dataclass(frozen=True)
class Call:
    """One call as the journal names it; ``request`` when its body is known."""

    family: str
    name: str
    witness: str
    request: Any = _UNKNOWN

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"family": self.family, "name": self.name, "witness": self.witness}
        if self.request is not _UNKNOWN:
            out["request"] = self.request
        return out


@dataclass(frozen=True)
class Divergence:
    """The first place the new code parts from the history. ``call_seq`` is None when the
    difference is in how the run ended rather than at a call."""

    era: int
    call_seq: int | None
    reason: str
    recorded: Call | None
    issued: Call | None

    def diff(self) -> str:
        """Recorded vs issued, as a unified diff of their pretty JSON."""
        lines = [
            json.dumps(None if c is None else c.to_json(), indent=2, sort_keys=True).splitlines()
            for c in (self.recorded, self.issued)
        ]
        return "\n".join(
            difflib.unified_diff(lines[0], lines[1], "recorded", "new code", lineterm="")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "era": self.era,
            "call_seq": self.call_seq,
            "reason": self.reason,
            "recorded": None if self.recorded is None else self.recorded.to_json(),
            "issued": None if self.issued is None else self.issued.to_json(),
            "diff": self.diff(),
        }


@dataclass(frozen=True)
class RunReplay:
    """What replaying one recorded run came to."""

    session_id: str
    capability: str
    result: ReplayResult
    replayed: int = 0
    detail: str = ""
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.result is ReplayResult.OK

    def explain(self) -> str:
        """One line per run, then the divergence's diff indented (what the CLI prints)."""
        head = f"{self.session_id} ({self.capability}): {str(self.result).upper()}"
        d = self.divergence
        if d is None:
            return f"{head} — {self.detail}" + (
                f", {self.replayed} calls replayed" if self.ok else ""
            )
        where = "at the end" if d.call_seq is None else f"at era {d.era} call_seq {d.call_seq}"
        lines = [f"{head} {where}: {d.reason}"]
        lines += [f"    {line}" for line in d.diff().splitlines()]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.session_id,
            "capability": self.capability,
            "verdict": str(self.result),  # the key `runplane replay --json` has always printed
            "replayed": self.replayed,
            "detail": self.detail,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
        }


class _Tap:
    """The agent's coroutine, noting each effect it issues with the slot it will take."""

    def __init__(self, coro: Coroutine[Any, Any, Any], run: Run) -> None:
        self._coro = coro
        self._run = run
        self.issued: list[tuple[Slot, Effect]] = []

    def send(self, value: Any) -> Any:
        return self._note(self._coro.send(value))

    def throw(self, error: BaseException) -> Any:
        return self._note(self._coro.throw(error))

    def close(self) -> None:
        self._coro.close()

    def _note(self, request: Any) -> Any:
        if isinstance(request, Effect):
            # The driver gives it the run's cursor: derived draws already took theirs.
            self.issued.append(((self._run.era, self._run.cursor), request))
        return request


def _replay(
    spec: AgentSpec, recording: Recording, calendars: Calendars | None
) -> tuple[Run, list[tuple[Slot, Effect]]]:
    """Replay era 0 verify-only; the run as it ended and every effect the code issued."""
    taps: list[_Tap] = []
    holder: list[Run] = []

    def tapped(ctx: StepCtx, value: Any) -> Any:
        tap = _Tap(cast("Coroutine[Any, Any, Any]", spec.fn(ctx, value)), holder[0])
        taps.append(tap)
        return tap

    snapshot = replace(
        recording.snapshot, era=0, era_started_ms=0, in_flight_json=None, open_request_json=None
    )
    era0 = {k: v for k, v in recording.results.items() if k[0] == 0}
    run = run_from_snapshot(
        replace(spec, fn=tapped), snapshot, era0, calendars=calendars, tools=None
    )
    holder.append(run)
    run.status = RunStatus.RUNNING
    run.parked, run.in_flight, run.doubts, run.pending = None, None, [], []
    run.checkpoint_json = run.output_json = None
    run.error = None
    run.verify_only = True
    run.rec.begin(snapshot.started_ms)
    launch(run)
    return run, (taps[0].issued if taps else [])


def attach_requests(
    spec: AgentSpec, recording: Recording, *, calendars: Calendars | None = None
) -> Recording:
    """The recording with the request bodies the code importable now issues *with the recorded
    witness* (run it where the recorded code is deployed, e.g. at export)."""
    _, issued = _replay(spec, recording, calendars)
    calls = recorded_calls(recording.journal)
    found = dict(recording.requests)
    for slot, effect in issued:
        call = calls.get(slot)
        if call is not None and call == _key(effect):
            found.setdefault(slot, effect.request)
    return replace(recording, requests=found)


def replay_recording(
    spec: AgentSpec | None, recording: Recording, *, calendars: Calendars | None = None
) -> RunReplay:
    """OK, or the first divergence of the code in ``spec`` from ``recording``."""
    run_id, cap = recording.session_id, recording.capability
    problems = recording.problems()
    if problems:
        return RunReplay(run_id, cap, ReplayResult.BROKEN, detail="; ".join(problems))
    if spec is None:
        return RunReplay(
            run_id, cap, ReplayResult.MISSING, detail=f"no agent {cap!r} is registered"
        )
    run, issued = _replay(spec, recording, calendars)
    replayed = run.rec.out.replayed
    found = _first_divergence(recording, run, issued)
    if found is None:
        detail = "ended as recorded" if recording.ended else "consistent to the end of its history"
        return RunReplay(run_id, cap, ReplayResult.OK, replayed, detail)
    return RunReplay(run_id, cap, ReplayResult.DIVERGED, replayed, found.reason, found)


def replay_with(agents: AgentRegistry, recording: Recording) -> RunReplay:
    """``replay_recording`` against the version of ``agents`` that would serve the run: the
    newest of the line it records (``AgentRegistry.spec_for``), as the executor would pick.
    A run whose line ``agents`` lacks is MISSING: deployed so, it would stay parked."""
    try:
        spec = agents.spec_for(recording.capability, recording.snapshot.agent_version)
    except VersionNotDeployed as exc:
        detail = f"{recording.capability} {exc}: the run would stay parked"
        return RunReplay(
            recording.session_id, recording.capability, ReplayResult.MISSING, 0, detail
        )
    except UnknownCapability:
        return replay_recording(None, recording)
    return replay_recording(spec, recording)


def _key(effect: Effect) -> CallKey:
    return effect.family, effect.name, request_witness(effect.request)


def _first_divergence(
    recording: Recording, run: Run, issued: list[tuple[Slot, Effect]]
) -> Divergence | None:
    calls = {s: c for s, c in recorded_calls(recording.journal).items() if s[0] == 0}
    ended = recording.ended
    ended_in_era0 = ended is not None and ended.era == 0
    if run.status is RunStatus.QUARANTINED:
        return _quarantined(recording, run, issued, calls, ended_in_era0)
    # The new code ended (completed or failed) without leaving the history.
    past = sorted(s for s in calls if s[1] >= run.cursor)
    if past:
        slot = past[0]
        reason = f"the new code ends ({run.status}) at call_seq {slot[1]}; history has more calls"
        return Divergence(0, slot[1], reason, _recorded(recording, slot, calls[slot]), None)
    if not ended_in_era0 or ended is None:
        return None
    return _ending_differs(recording, run, ended.kind)


def _quarantined(
    recording: Recording,
    run: Run,
    issued: list[tuple[Slot, Effect]],
    calls: dict[Slot, CallKey],
    ended_in_era0: bool,
) -> Divergence | None:
    """The verify-only replay stopped the run: where, and whether that is a divergence (an
    in-flight history simply ends)."""
    reason = (run.error.message if run.error is not None else "") or "diverged"
    if run.fault is not None:  # a derived draw landed on a journaled slot
        return Divergence(0, None, reason, None, None)
    if not issued or _replayed(recording, *issued[-1]):  # it stopped; the history goes on
        after = issued[-1][0][1] if issued else -1
        skipped = sorted(s for s in calls if s[1] > after)
        if not skipped:
            return Divergence(0, None, reason, None, None)
        first = skipped[0]
        return Divergence(0, first[1], reason, _recorded(recording, first, calls[first]), None)
    slot, effect = issued[-1]
    now = _call(effect)
    recorded = calls.get(slot)
    later = any(s[1] > slot[1] for s in (*calls, *recording.results) if s[0] == 0)
    if slot in recording.results or later:
        return Divergence(0, slot[1], reason, _recorded(recording, slot, recorded), now)
    if ended_in_era0:
        reason = f"the recorded run ended at call_seq {slot[1]}; the new code issues more calls"
        return Divergence(0, slot[1], reason, None, now)
    if recorded is not None and recorded != _key(effect):
        reason = f"the call in flight at call_seq {slot[1]} differs"
        return Divergence(0, slot[1], reason, _recorded(recording, slot, recorded), now)
    return None  # in flight: the history ends here, consistently


def _ending_differs(recording: Recording, run: Run, kind: JournalKind) -> Divergence | None:
    expected = {
        JournalKind.RUN_COMPLETED: RunStatus.COMPLETED,
        JournalKind.RUN_FAILED: RunStatus.FAILED,
    }
    want = expected.get(kind)
    if want is not None and want is not run.status:
        why = "" if run.error is None else f" ({run.error.type}: {run.error.message})"
        return Divergence(0, None, f"recorded {want}, the new code {run.status}{why}", None, None)
    snap = recording.snapshot
    if want is RunStatus.COMPLETED and snap.status is RunStatus.COMPLETED:
        old = canonical_json(json.loads(snap.output_json or "null"))
        new = canonical_json(json.loads(run.output_json or "null"))
        if old != new:
            return Divergence(
                0, None, f"another output: recorded {old}, new code {new}", None, None
            )
    return None


def _replayed(recording: Recording, slot: Slot, effect: Effect) -> bool:
    entry = recording.results.get(slot)
    return entry is not None and (entry.family, entry.name, entry.request_witness) == _key(effect)


def _call(effect: Effect) -> Call:
    return Call(effect.family, effect.name, request_witness(effect.request), effect.request)


def _recorded(recording: Recording, slot: Slot, call: CallKey | None) -> Call | None:
    if call is None:
        return None
    return Call(*call, request=recording.requests.get(slot, _UNKNOWN))
