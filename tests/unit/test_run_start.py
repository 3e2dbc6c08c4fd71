"""run_start: seq 0 and the StartRun that hands its hash over state the same run."""

from __future__ import annotations

import pytest

from runplane.core.chain import run_start
from runplane.core.verify import verify_chain
from runplane.wire import JournalKind


@pytest.mark.parametrize("case_id", [None, "t1:c-9"])
def test_start_run_states_what_seq_0_commits_to(case_id: str | None) -> None:
    seq0, start = run_start(
        "r-1",
        capability="refund",
        admission_key="k-1",
        tenant="t1",
        initiator="ada",
        input_json='{"invoice_id":"I-1"}',
        now_ms=1_234,
        case_id=case_id,
    )
    assert seq0.kind is JournalKind.RUN_ADMITTED and seq0.seq == 0
    assert verify_chain([seq0]).ok
    assert start.admitted_hash == seq0.hash and start.admitted_ms == seq0.stamp_ms == 1_234
    assert (start.session_id, start.input_json, start.case_id) == (
        "r-1",
        '{"invoice_id":"I-1"}',
        case_id,
    )
    facts = {
        "capability": start.capability,
        "admission_key": start.admission_key,
        "tenant": start.tenant,
        "initiator": start.initiator,
    }
    assert {k: seq0.attrs[k] for k in facts} == facts
    assert seq0.attrs.get("case_id") == case_id
