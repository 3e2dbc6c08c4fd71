"""Admission's pure core: ids, duplicates, refusals, status updates, the four records."""

from __future__ import annotations

import dataclasses

import pytest

from runplane.core import verify_chain
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    JournalKind,
    JournalRecord,
    RunStatus,
    RunStatusUpdate,
    StartRun,
    encode,
)
from services.admission.decide import (
    Admitted,
    CapabilitySpec,
    Duplicate,
    Ignored,
    Position,
    Refusal,
    Refused,
    StatusUpdated,
    case_id_for,
    decide,
    mint_run_id,
    outputs,
    read_request_leniently,
    refuse_unreadable,
)

CAPS = {
    "refund": CapabilitySpec(
        {
            "type": "object",
            "properties": {"invoice_id": {"type": "string", "minLength": 1}},
            "required": ["invoice_id"],
        }
    ),
    "free": CapabilitySpec(None),
}
POS = Position("admission", 2, 41)
NOW = 1_700_000_000_000


def req(
    key: str = "k1",
    capability: str = "refund",
    input_json: str = '{"invoice_id": "i1"}',
    **kw: object,
) -> AdmissionRequest:
    fields: dict[str, object] = {
        "admission_key": key,
        "capability": capability,
        "input_json": input_json,
        "tenant": "acme",
        "initiator": "alice",
        **kw,
    }
    return AdmissionRequest(**fields)  # type: ignore[arg-type]


def test_run_id_is_derived_from_key_and_position() -> None:
    a = mint_run_id("k1", POS)
    assert a == mint_run_id("k1", POS)  # a re-processed record mints the same id
    assert a.startswith("r-") and len(a) == 38
    assert a != mint_run_id("k2", POS)
    assert a != mint_run_id("k1", dataclasses.replace(POS, offset=42))
    assert a != mint_run_id("k1", dataclasses.replace(POS, partition=3))


def test_case_id_is_deterministic_over_sorted_keys_and_tenant() -> None:
    one = case_id_for("acme", {"dispute": "D-17", "customer": "C-9"})
    assert one == case_id_for("acme", {"customer": "C-9", "dispute": "D-17"})
    assert one is not None and one.startswith("c-") and len(one) == 26
    assert one != case_id_for("other", {"dispute": "D-17", "customer": "C-9"})
    assert one != case_id_for("acme", {"dispute": "D-18", "customer": "C-9"})
    assert case_id_for("acme", {}) is None


def test_new_key_is_admitted_with_four_consistent_records() -> None:
    d = decide(None, "k1", POS, req(correlation_keys={"dispute": "D-17"}), CAPS, NOW)
    assert isinstance(d, Admitted)
    run_id = mint_run_id("k1", POS)
    case_id = case_id_for("acme", {"dispute": "D-17"})
    assert d.claim.run_id == d.reply.run_id == d.start.session_id == d.journal.session_id == run_id
    assert d.claim.case_id == d.reply.case_id == d.start.case_id == case_id
    assert d.claim.status == RunStatus.ADMITTED and d.reply.outcome == AdmissionOutcome.ADMITTED
    assert d.journal.seq == 0 and d.journal.kind == JournalKind.RUN_ADMITTED
    assert d.start.admitted_hash == d.journal.hash  # the chain's handover to the executor
    assert verify_chain([d.journal]).ok
    assert d.journal.attrs["admission_key"] == "k1"
    topics = [(t, k) for t, k, _ in outputs(d)]
    assert topics == [
        ("admission.claims", "runplane.claim/acme/k1"),  # claims are per (tenant, key)
        ("journal", run_id),
        ("runs.inbox", run_id),
        ("admission.replies", "k1"),
    ]
    types = [type(r) for _, _, r in outputs(d)]
    assert types == [AdmissionClaim, JournalRecord, StartRun, AdmissionReply]


def test_known_key_is_a_duplicate_naming_the_original_run() -> None:
    first = decide(None, "k1", POS, req(), CAPS, NOW)
    assert isinstance(first, Admitted)
    # Even a different (or invalid) request with a known key is answered with the original.
    again = decide(
        first.claim,
        "k1",
        dataclasses.replace(POS, offset=99),
        req(capability="nope"),
        CAPS,
        NOW + 5,
    )
    assert isinstance(again, Duplicate)
    assert again.reply.outcome == AdmissionOutcome.DUPLICATE
    assert again.reply.run_id == first.claim.run_id
    assert again.reply.status == RunStatus.ADMITTED
    assert again.reply.task_id is None
    assert [t for t, _, _ in outputs(again)] == ["admission.replies"]


def test_duplicate_of_a_run_awaiting_a_human_carries_the_task() -> None:
    first = decide(None, "k1", POS, req(), CAPS, NOW)
    assert isinstance(first, Admitted)
    update = RunStatusUpdate(
        admission_key="k1",
        run_id=first.claim.run_id,
        status=RunStatus.AWAITING_HUMAN,
        task_id="t-7",
        updated_ms=NOW + 10,
    )
    upd = decide(first.claim, "k1", POS, update, CAPS, NOW + 11)
    assert isinstance(upd, StatusUpdated)
    assert upd.claim.status == RunStatus.AWAITING_HUMAN and upd.claim.task_id == "t-7"
    dup = decide(upd.claim, "k1", POS, req(), CAPS, NOW + 12)
    assert isinstance(dup, Duplicate)
    assert dup.reply.status == RunStatus.AWAITING_HUMAN and dup.reply.task_id == "t-7"


def test_status_updates_for_unknown_or_other_runs_or_stale_are_ignored() -> None:
    first = decide(None, "k1", POS, req(), CAPS, NOW)
    assert isinstance(first, Admitted)

    def update(run_id: str, at: int) -> RunStatusUpdate:
        return RunStatusUpdate(
            admission_key="k1", run_id=run_id, status=RunStatus.COMPLETED, updated_ms=at
        )

    assert isinstance(
        decide(None, "k1", POS, update(first.claim.run_id, NOW + 1), CAPS, NOW), Ignored
    )
    assert isinstance(
        decide(first.claim, "k1", POS, update("r-other", NOW + 1), CAPS, NOW), Ignored
    )
    # Stale by journal seq, not by wall clock (tests/unit/test_admission_status_order.py).
    stale = dataclasses.replace(update(first.claim.run_id, NOW + 1), seq=3)
    assert isinstance(
        decide(dataclasses.replace(first.claim, status_seq=4), "k1", POS, stale, CAPS, NOW), Ignored
    )
    done = decide(first.claim, "k1", POS, update(first.claim.run_id, NOW + 1), CAPS, NOW)
    assert isinstance(done, StatusUpdated) and done.claim.status == RunStatus.COMPLETED


@pytest.mark.parametrize(
    ("request_", "key", "code", "fragment"),
    [
        (req(capability="nope"), "k1", Refusal.UNKNOWN_CAPABILITY, "unknown capability 'nope'"),
        (req(input_json="{not json"), "k1", Refusal.INVALID_INPUT, "not JSON"),
        (req(input_json="{}"), "k1", Refusal.INVALID_INPUT, "'invoice_id' is a required property"),
        (req(input_json='{"invoice_id": ""}'), "k1", Refusal.INVALID_INPUT, "invoice_id"),
        (
            req(input_json='"x' + "a" * 600_000 + '"', capability="free"),
            "k1",
            Refusal.INVALID_INPUT,
            "larger than",
        ),
        (req(key="k1"), "k2", Refusal.BAD_KEY, "must equal admission_key"),
    ],
)
def test_refusals_claim_nothing(
    request_: AdmissionRequest, key: str, code: Refusal, fragment: str
) -> None:
    d = decide(None, key, POS, request_, CAPS, NOW)
    assert isinstance(d, Refused)
    assert d.code == code
    assert d.reply.outcome == AdmissionOutcome.REFUSED
    assert d.reply.reason is not None and fragment in d.reply.reason
    assert d.reply.run_id is None
    assert [t for t, _, _ in outputs(d)] == ["admission.replies"]


def test_schema_free_capability_accepts_any_json() -> None:
    assert isinstance(
        decide(None, "k1", POS, req(capability="free", input_json="[1, 2]"), CAPS, NOW), Admitted
    )


def _invalid_request_bytes(key: str, tenant: str) -> bytes:
    # Construct a valid request, then swap fields in the encoded dict: what a foreign
    # producer that skips our validation could send.
    import io

    from fastavro import schemaless_writer

    from runplane.wire import parsed_schema, schema_fingerprint

    buf = io.BytesIO()
    record = {
        "admission_key": key,
        "capability": "refund",
        "input_json": "{}",
        "correlation_keys": {},
        "tenant": tenant,
        "initiator": "x",
        "requested_ms": 0,
    }
    schemaless_writer(buf, parsed_schema(AdmissionRequest), record)
    return b"\xc3\x01" + schema_fingerprint(AdmissionRequest) + buf.getvalue()


@pytest.mark.parametrize(
    ("key", "tenant", "code"),
    [
        ("k1", "ac/me", Refusal.BAD_TENANT),
        ("k1", "ac\x07me", Refusal.BAD_TENANT),
        ("", "acme", Refusal.BAD_KEY),
        ("k" * 300, "acme", Refusal.BAD_KEY),
    ],
)
def test_unreadable_but_parseable_requests_are_refused(
    key: str, tenant: str, code: Refusal
) -> None:
    data = _invalid_request_bytes(key, tenant)
    fields = read_request_leniently(data)
    assert fields is not None and fields["tenant"] == tenant
    msg_key = key or "fallback"
    d = refuse_unreadable(msg_key, fields, "validation failed", NOW)
    assert d is not None and d.code == code and d.reply.admission_key == msg_key


def test_garbage_is_not_refused_but_dead_lettered() -> None:
    assert read_request_leniently(b"\x00garbage") is None
    assert (
        read_request_leniently(
            encode(
                RunStatusUpdate(
                    admission_key="k", run_id="r", status=RunStatus.RUNNING, updated_ms=1
                )
            )
        )
        is None
    )
    assert refuse_unreadable("k", None, "bad", NOW) is None
