"""A sealed sample run with steps worth drawing: for the run page's tests (unit and browser).

``stepped_run`` returns what a refund run leaves on the topics — its journal records, its
result entries and its latest snapshot — with a generation (400 ms), a tool call (120 ms), a
tool call that failed (300 ms, ``card declined``), a wait for a person of role ``finance``
(2 s, approved), then the refund (200 ms) and the end. ``waiting=True`` stops it at the wait:
the run is parked on the finance task, AWAITING_HUMAN, with no output yet. Every hash is the
real one (``runplane.core.seal``), so the chain verifies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runplane.core.chain import Draft, body_digest, default_label, request_witness, seal
from runplane.wire import (
    ZERO_HASH,
    Cost,
    ErrorInfo,
    JournalKind,
    JournalRecord,
    ParkedOn,
    ParkKind,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    TenantId,
)

K = JournalKind
INPUT = {"order": "A-17", "amount": 42}
OUTPUT = {"refunded": 42, "note": "approved by finance"}
DECLINED = ErrorInfo(type="ToolError", message="card declined", retryable=False)
# (call_seq, family, name, announced at, recorded at, value or error), relative to the start.
_CALLS: list[tuple[int, str, str, int, int, Any]] = [
    (0, "generation", "model:scripted/echo", 5, 405, {"plan": "refund"}),
    (1, "tool", "tool://fetch_invoice", 410, 530, {"invoice": "INV-9"}),
    (2, "tool", "tool://charge_card", 540, 840, DECLINED),
]
_APPROVAL = (3, "approval", "approval:finance", 850, 2850)
_REFUND = (4, "tool", "tool://refund", 2860, 3060, {"refund": "R-1"})
ENDED_AT = 3070


@dataclass(frozen=True)
class SteppedRun:
    records: list[JournalRecord]
    results: dict[tuple[int, int], ResultEntry]
    snapshot: SessionSnapshot

    @property
    def task_id(self) -> str:
        return f"{self.snapshot.session_id}/0/{_APPROVAL[0]}"


def _entry(sid: str, call: int, family: str, name: str, at: int, value: Any) -> ResultEntry:
    failed = isinstance(value, ErrorInfo)
    return ResultEntry(
        session_id=sid,
        era=0,
        call_seq=call,
        family=family,
        name=name,
        request_witness="a" * 64,
        ok=not failed,
        value_json=None if failed else json.dumps(value, sort_keys=True),
        error=value if failed else None,
        stamp_ms=at,
        body_digest=body_digest(not failed, None if failed else value, value if failed else None),
        label=default_label([name]),
    )


def stepped_run(
    sid: str, *, start_ms: int, waiting: bool = False, tenant: str = "default"
) -> SteppedRun:
    admitted = {
        "capability": "refund",
        "tenant": tenant,
        "initiator": "sample",
        "admission_key": f"key-{sid}",
    }
    drafts: list[Draft] = [Draft(sid, 0, 0, K.RUN_ADMITTED, start_ms, attrs=admitted)]
    results: dict[tuple[int, int], ResultEntry] = {}

    def add(kind: JournalKind, at: int, **kw: Any) -> None:
        drafts.append(Draft(sid, len(drafts), 0, kind, start_ms + at, **kw))

    def call(c: int, family: str, name: str, begin: int, end: int, value: Any) -> None:
        e = _entry(sid, c, family, name, start_ms + end, value)
        results[(0, c)] = e
        slot = {"call_seq": c, "family": family, "name": name, "request_witness": "a" * 64}
        add(K.EFFECT_ANNOUNCED, begin, **slot, attrs={"mutating": "false", "recovery": "retry"})
        cost = Cost(tokens_in=30, tokens_out=12, units=0.2) if family == "generation" else None
        add(K.EFFECT_RECORDED, end, **slot, body_digest=e.body_digest, label=e.label, cost=cost)

    for step in _CALLS:
        call(*step)
    c, family, name, opened, decided = _APPROVAL
    task = f"{sid}/0/{c}"
    slot = {"call_seq": c, "family": family, "name": name, "request_witness": "a" * 64}
    add(
        K.TASK_OPENED,
        opened,
        **slot,
        attrs={"task_id": task, "kind": "APPROVAL", "role": "finance"},
    )
    add(K.RUN_PARKED, opened + 1, **slot, attrs={"parked_on": f"task:{task}"})
    if not waiting:
        e = _entry(sid, c, family, name, start_ms + decided, {"approved": True})
        results[(0, c)] = e
        add(
            K.TASK_DECIDED,
            decided,
            **slot,
            body_digest=e.body_digest,
            label=e.label,
            attrs={"outcome": "APPROVED", "task_id": task},
        )
        call(*_REFUND)
        add(K.RUN_COMPLETED, ENDED_AT, attrs={"output_digest": request_witness(OUTPUT)})
    records: list[JournalRecord] = []
    prev = ZERO_HASH
    for d in drafts:
        records.append(seal(d, prev))
        prev = records[-1].hash
    snapshot = SessionSnapshot(
        session_id=sid,
        capability="refund",
        status=RunStatus.AWAITING_HUMAN if waiting else RunStatus.COMPLETED,
        era=0,
        next_seq=len(records),
        last_hash=prev,
        parked_on=ParkedOn(kind=ParkKind.TASK, ref=task, call_seq=c) if waiting else None,
        admission_key=f"key-{sid}",
        tenant=TenantId(tenant),
        initiator="sample",
        input_json=json.dumps(INPUT, sort_keys=True),
        output_json=None if waiting else json.dumps(OUTPUT, sort_keys=True),
        started_ms=start_ms,
        updated_ms=records[-1].stamp_ms,
    )
    return SteppedRun(records, results, snapshot)
