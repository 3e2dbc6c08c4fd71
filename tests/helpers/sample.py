"""A sealed sample run, built with the core's chain functions: for tests and benchmarks.

``sample_run`` returns the journal records and result entries a completed run with ``calls``
generation calls would leave (admitted, announce + record per call, completed), sealed by
``runplane.core.seal`` so every hash is the real one. ``parent`` and ``children`` add the
commission links a commissioned run and its parent carry (``runplane.journal.tree``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from runplane.core.chain import Draft, body_digest, default_label, seal
from runplane.wire import ZERO_HASH, Cost, JournalKind, JournalRecord, ResultEntry

_ECHO = "model:scripted/echo"


def sample_entry(
    session_id: str,
    call_seq: int,
    value: object,
    *,
    era: int = 0,
    stamp_ms: int = 1,
    family: str = "generation",
    name: str = _ECHO,
) -> ResultEntry:
    """The ResultEntry of one successful call returning ``value``."""
    return ResultEntry(
        session_id=session_id,
        era=era,
        call_seq=call_seq,
        family=family,
        name=name,
        request_witness="a" * 64,
        ok=True,
        value_json=json.dumps(value, sort_keys=True),
        stamp_ms=stamp_ms,
        body_digest=body_digest(True, value, None),
        label=default_label([name]),
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
    parent: str | None = None,
    children: Sequence[str] = (),
) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    """(records in seq order, results by (era, call_seq)) of a completed run: ``calls``
    generations, then one commission per child run in ``children``; ``parent``: the run
    that commissioned this one (its RUN_ADMITTED's ``parent_run``)."""
    attrs = {"capability": capability, "tenant": "default", "initiator": "sample"}
    if case_id is not None:
        attrs["case_id"] = case_id
    if parent is not None:
        attrs["parent_run"] = parent
    drafts = [Draft(session_id, 0, 0, JournalKind.RUN_ADMITTED, start_ms, attrs=attrs)]
    results: dict[tuple[int, int], ResultEntry] = {}
    calls_made: list[tuple[str, str, dict[str, str], Cost | None]] = [
        ("generation", _ECHO, {}, Cost(tokens_in=tokens[0], tokens_out=tokens[1], units=units))
    ] * calls
    for i, child in enumerate(children):
        calls_made.append(
            ("commission", f"agent/{capability}", {"child_run": child, "node": f"n{i}"}, None)
        )
    for c, (family, name, facts, cost) in enumerate(calls_made):
        stamp = start_ms + 1 + c
        # The entry states what its chain record states (the verifier holds them to it).
        value = {"run_id": facts["child_run"]} if "child_run" in facts else {"n": c}
        e = sample_entry(session_id, c, value, stamp_ms=stamp, family=family, name=name)
        results[(0, c)] = e
        drafts.append(
            Draft(
                session_id,
                len(drafts),
                0,
                JournalKind.EFFECT_ANNOUNCED,
                stamp,
                call_seq=c,
                family=family,
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
                family=family,
                name=name,
                request_witness=e.request_witness,
                body_digest=e.body_digest,
                label=e.label,
                cost=cost,
                attrs=facts,
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
