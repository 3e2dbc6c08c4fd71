"""A sealed sample run, built with the core's chain functions: for tests, demos and drills.

``sample_run`` returns the journal records and result entries a completed run with ``calls``
generation calls would leave (admitted, announce + record per call, completed), sealed by
``runplane.core.seal`` so every hash is the real one.
"""

from __future__ import annotations

import json

from runplane.core.chain import Draft, body_digest, default_label, seal
from runplane.wire import ZERO_HASH, Cost, JournalKind, JournalRecord, ResultEntry


def sample_entry(
    session_id: str, call_seq: int, value: object, *, era: int = 0, stamp_ms: int = 1
) -> ResultEntry:
    """The ResultEntry of one successful call returning ``value``."""
    return ResultEntry(
        session_id=session_id,
        era=era,
        call_seq=call_seq,
        family="generation",
        name="model:scripted/echo",
        request_witness="a" * 64,
        ok=True,
        value_json=json.dumps(value, sort_keys=True),
        stamp_ms=stamp_ms,
        body_digest=body_digest(True, value, None),
        label=default_label(["model:scripted/echo"]),
    )


def sample_run(
    session_id: str,
    calls: int = 3,
    *,
    capability: str = "refund",
    case_id: str | None = "c-sample",
    start_ms: int = 1_000,
    tokens: tuple[int, int] = (10, 5),
    units: float = 0.5,
) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    """(records in seq order, results by (era, call_seq)) of a completed run."""
    attrs = {"capability": capability, "tenant": "default", "initiator": "sample"}
    if case_id is not None:
        attrs["case_id"] = case_id
    drafts = [Draft(session_id, 0, 0, JournalKind.RUN_ADMITTED, start_ms, attrs=attrs)]
    results: dict[tuple[int, int], ResultEntry] = {}
    for c in range(calls):
        stamp = start_ms + 1 + c
        # The entry states what its chain record states (the verifier holds them to it).
        e = sample_entry(session_id, c, {"n": c}, stamp_ms=stamp)
        results[(0, c)] = e
        drafts.append(
            Draft(
                session_id,
                len(drafts),
                0,
                JournalKind.EFFECT_ANNOUNCED,
                stamp,
                call_seq=c,
                family="generation",
            )
        )
        drafts.append(
            Draft(
                session_id,
                len(drafts),
                0,
                JournalKind.EFFECT_RECORDED,
                stamp,
                call_seq=c,
                family="generation",
                name="model:scripted/echo",
                request_witness=e.request_witness,
                body_digest=e.body_digest,
                label=e.label,
                cost=Cost(tokens_in=tokens[0], tokens_out=tokens[1], units=units),
            )
        )
    drafts.append(Draft(session_id, len(drafts), 0, JournalKind.RUN_COMPLETED, start_ms + 1_000))
    records: list[JournalRecord] = []
    prev = ZERO_HASH
    for d in drafts:
        r = seal(d, prev)
        records.append(r)
        prev = r.hash
    return records, results
