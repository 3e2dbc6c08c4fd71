"""Admission keys are per tenant: one tenant can neither see nor pre-empt another's runs.

The handler is driven over a ``State`` that takes what it emits to ``admission.claims``, as
the processor commits it, so the claims table behaves as on the broker.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.keys import claim_key
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    RunStatus,
    RunStatusUpdate,
)
from services.admission.decide import CapabilitySpec, find_claim
from services.admission.handler import AdmissionHandler

CAPS = {"free": CapabilitySpec(None)}
NOW = 1_700_000_000_000


class Admission:
    """The handler over a claims table that keeps what it writes (one partition)."""

    def __init__(self) -> None:
        self.handler = AdmissionHandler(CAPS)
        self.state = State(self.handler.tables)
        self.offset = 0

    def send(self, value: AdmissionRequest | RunStatusUpdate) -> Sequence[Emit]:
        self.offset += 1
        msg = Incoming("admission", 0, self.offset, value.admission_key, value, NOW)
        emits = self.handler.handle(self.state, msg, NOW + self.offset)
        for e in emits:
            if e.topic == "admission.claims":
                assert e.partition_key == value.admission_key  # on the key's partition
                self.state._stage("claims", 0, e.key, e.value)
        self.state._commit()
        return emits

    def ask(self, tenant: str, key: str) -> AdmissionReply:
        emits = self.send(
            AdmissionRequest(
                admission_key=key,
                capability="free",
                input_json="{}",
                correlation_keys={},
                tenant=tenant,
                initiator="ivan",
                requested_ms=NOW,
            )
        )
        [reply] = [e.value for e in emits if isinstance(e.value, AdmissionReply)]
        return reply

    def claims(self) -> dict[str, AdmissionClaim]:
        return {k: v for k, v in self.state.items("claims") if isinstance(v, AdmissionClaim)}


def _older_claim(tenant: str, key: str, run_id: str) -> AdmissionClaim:
    return AdmissionClaim(
        admission_key=key,
        run_id=run_id,
        capability="free",
        tenant=tenant,
        status=RunStatus.AWAITING_HUMAN,
        task_id="t-secret",
        admitted_ms=1,
        updated_ms=1,
    )


def test_one_key_from_two_tenants_makes_two_runs_and_neither_answer_names_the_other() -> None:
    a = Admission()
    acme = a.ask("acme", "order-17")
    globex = a.ask("globex", "order-17")
    assert acme.outcome == globex.outcome == AdmissionOutcome.ADMITTED
    assert acme.run_id is not None and globex.run_id is not None
    assert acme.run_id != globex.run_id
    assert (acme.tenant, globex.tenant) == ("acme", "globex")
    rows = a.claims()
    assert set(rows) == {claim_key("acme", "order-17"), claim_key("globex", "order-17")}
    # Each tenant's retry is answered with its own run, never the other's.
    again_acme, again_globex = a.ask("acme", "order-17"), a.ask("globex", "order-17")
    assert again_acme.outcome == again_globex.outcome == AdmissionOutcome.DUPLICATE
    assert (again_acme.run_id, again_globex.run_id) == (acme.run_id, globex.run_id)


def test_a_key_another_tenant_used_first_does_not_stop_a_run() -> None:
    a = Admission()
    first = a.ask("globex", "inv-1")
    a.send(  # globex's run waits on a human: a duplicate would show its task
        RunStatusUpdate(
            admission_key="inv-1",
            run_id=first.run_id or "",
            status=RunStatus.AWAITING_HUMAN,
            task_id="t-globex",
            updated_ms=NOW,
            seq=3,
            tenant="globex",
        )
    )
    mine = a.ask("acme", "inv-1")
    assert mine.outcome == AdmissionOutcome.ADMITTED
    assert mine.run_id != first.run_id and mine.task_id is None
    assert mine.status == RunStatus.ADMITTED
    assert a.claims()[claim_key("globex", "inv-1")].task_id == "t-globex"


def test_an_older_claim_is_read_as_the_tenant_it_records() -> None:
    a = Admission()
    a.state._load("claims", 0, {"order-9": _older_claim("acme", "order-9", "r-old")})
    # acme's key: the older row is its claim (a duplicate, with its task).
    dup = a.ask("acme", "order-9")
    assert (dup.outcome, dup.run_id, dup.task_id) == (
        AdmissionOutcome.DUPLICATE,
        "r-old",
        "t-secret",
    )
    # globex's same key: the older row is acme's, not globex's — a run of its own.
    other = a.ask("globex", "order-9")
    assert other.outcome == AdmissionOutcome.ADMITTED and other.run_id != "r-old"
    assert other.task_id is None
    # The older row stays where it is, and the status of its run still reaches it, from an
    # executor that names the tenant and from one that predates the field alike.
    for seq, tenant in ((4, "acme"), (5, None)):
        a.send(
            RunStatusUpdate(
                admission_key="order-9",
                run_id="r-old",
                status=RunStatus.RUNNING,
                updated_ms=NOW,
                seq=seq,
                tenant=tenant,
            )
        )
        assert a.claims()["order-9"].status_seq == seq
    assert set(a.claims()) == {"order-9", claim_key("globex", "order-9")}


def test_a_status_update_of_another_tenant_changes_no_claim() -> None:
    a = Admission()
    run = a.ask("acme", "k").run_id or ""
    before = a.claims()
    emits = a.send(
        RunStatusUpdate(
            admission_key="k",
            run_id=run,
            status=RunStatus.COMPLETED,
            updated_ms=NOW,
            seq=9,
            tenant="globex",
        )
    )
    assert emits == [] and a.claims() == before


def test_find_claim_never_hands_one_tenant_another_s_older_row() -> None:
    rows = {"k": _older_claim("acme", "k", "r-1")}
    assert find_claim(rows.get, "acme", "k") == ("k", rows["k"])
    assert find_claim(rows.get, "globex", "k") is None
    assert find_claim(rows.get, None, "k") == ("k", rows["k"])  # an update without a tenant


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["acme", "globex", "initech"]), st.sampled_from(["a", "b"])),
        min_size=1,
        max_size=12,
    )
)
def test_every_answer_names_only_a_run_of_the_asking_tenant(
    asks: list[tuple[str, str]],
) -> None:
    a = Admission()
    owner: dict[str, str] = {}  # run id -> tenant that was admitted it
    for tenant, key in asks:
        reply = a.ask(tenant, key)
        assert reply.tenant == tenant and reply.run_id is not None
        if reply.outcome == AdmissionOutcome.ADMITTED:
            owner[reply.run_id] = tenant
        assert owner[reply.run_id] == tenant
    # One run per (tenant, key), ever.
    assert len(owner) == len(set(asks)) == len(a.claims())
