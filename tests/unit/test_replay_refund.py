"""The refund trace through the engine: block, decide, complete, replay for free."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import examples.refund  # noqa: F401  (registers "refund")
from runplane.core import REGISTRY, Runtime, replay_history
from runplane.errors import RetryableError, TerminalError
from runplane.testing import Driver
from runplane.wire import JournalKind, ParkKind, RunStatus, TaskKind


class Billing:
    """In-memory billing API under the tool names the example uses; dedupes by key."""

    def __init__(self) -> None:
        self.charges: dict[str, dict[str, Any]] = {}
        self.invocations: Counter[str] = Counter()
        self.fail_next_fetches = 0

    def tools(self) -> dict[str, Any]:
        return {
            "fetch_invoice": self.fetch_invoice,
            "charge_card": self.charge_card,
            "get_charge": self.get_charge,
        }

    def fetch_invoice(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.invocations["fetch_invoice"] += 1
        if self.fail_next_fetches:
            self.fail_next_fetches -= 1
            raise RetryableError("billing unavailable")
        return {"invoice_id": args["invoice_id"], "amount_cents": 700, "currency": "EUR"}

    def charge_card(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        assert key is not None
        self.invocations["charge_card"] += 1
        self.charges.setdefault(
            key, {"charge_id": f"ch-{len(self.charges) + 1}", "amount_cents": args["amount_cents"]}
        )
        return self.charges[key]

    def get_charge(self, args: dict[str, Any], key: str | None) -> dict[str, Any] | None:
        self.invocations["get_charge"] += 1
        return self.charges.get(key or "")


def _driver(billing: Billing, **kw: Any) -> Driver:
    return Driver(REGISTRY, tools=billing.tools(), **kw)


def test_first_pass_blocks_on_approval_with_one_live_call_and_no_charge() -> None:
    billing = Billing()
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-7"})
    assert run.status is RunStatus.AWAITING_HUMAN
    assert driver.live_calls == 1
    assert billing.invocations == Counter({"fetch_invoice": 1})
    assert billing.charges == {}
    assert run.task is not None and run.task.kind is TaskKind.APPROVAL
    assert run.snapshot.parked_on is not None and run.snapshot.parked_on.kind is ParkKind.TASK


def test_decision_completes_with_exactly_one_charge_and_replay_is_free() -> None:
    billing = Billing()
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-7"})
    run = driver.decide(run.session_id, "APPROVED", by=("bob",))
    assert run.status is RunStatus.COMPLETED
    assert run.output["status"] == "refunded" and run.output["amount_cents"] == 700
    assert run.output["approved_by"] == ["bob"]
    assert billing.invocations["charge_card"] == 1 and len(billing.charges) == 1
    assert driver.verify(run.session_id).ok

    # Replaying the completed history performs zero live calls and reproduces the output.
    report = replay_history(REGISTRY.spec("refund"), run.snapshot, run.results)
    assert report.live_calls == 0 and report.divergence is None
    assert report.status is RunStatus.COMPLETED
    assert report.output == run.output
    assert report.replayed == 3  # fetch_invoice, approval, charge_card
    assert billing.invocations["charge_card"] == 1


def test_rebuild_while_parked_resends_nothing_and_continues() -> None:
    billing = Billing()
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-9"})
    records_before = len(run.journal)
    driver.crash(run.session_id)  # evicted / executor restarted while waiting for a human
    run = driver.decide(run.session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED
    assert billing.invocations["fetch_invoice"] == 1  # replayed, not re-fetched
    assert billing.invocations["charge_card"] == 1
    assert len(run.journal) > records_before and driver.verify(run.session_id).ok


def test_rejected_refund_never_charges() -> None:
    billing = Billing()
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-1"})
    run = driver.decide(run.session_id, "REJECTED", comment="not eligible")
    assert run.status is RunStatus.COMPLETED
    assert run.output == {"status": "rejected", "invoice_id": "inv-1", "comment": "not eligible"}
    assert billing.charges == {} and billing.invocations["charge_card"] == 0


@pytest.mark.parametrize("phase", ["before_act", "after_act"])
def test_crash_around_the_charge_reconciles_through_the_probe(phase: str) -> None:
    billing = Billing()
    crashed: list[str] = []

    def hook(at: str, call: Any) -> bool:
        if at == phase and call.target == "charge_card" and not crashed:
            crashed.append(at)
            return True
        return False

    driver = _driver(billing, crash_hook=hook)
    run = driver.run("refund", {"invoice_id": "inv-3"})
    run = driver.decide(run.session_id, "APPROVED")
    # The decision is redelivered to the restarted executor, which rebuilds the run and
    # finds the charge announced but unrecorded: in doubt, recovery reconcile.
    assert crashed == [phase]
    assert run.status is RunStatus.COMPLETED
    # Reconcile asked billing instead of charging blindly: the charge exists exactly once.
    assert len(billing.charges) == 1
    # before_act: the probe says "never happened", so it is performed once, after the probe;
    # after_act: the probe finds it, so it is not performed again.
    assert billing.invocations["charge_card"] == 1
    assert billing.invocations["get_charge"] == 1
    kinds = [r.kind for r in run.journal]
    assert JournalKind.EFFECT_IN_DOUBT in kinds
    assert driver.verify(run.session_id).ok


def test_live_retries_collapse_into_one_recorded_outcome() -> None:
    billing = Billing()
    billing.fail_next_fetches = 2
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-5"})
    assert run.status is RunStatus.AWAITING_HUMAN
    entry = run.results[(0, 0)]
    assert entry.ok and entry.attempts == 3
    assert sum(1 for r in run.journal if r.kind is JournalKind.EFFECT_RECORDED) == 1


def test_restore_of_a_finished_run_is_refused() -> None:
    billing = Billing()
    driver = _driver(billing)
    run = driver.run("refund", {"invoice_id": "inv-2"})
    run = driver.decide(run.session_id, "APPROVED")
    with pytest.raises(TerminalError, match="already ended"):
        Runtime.restore(REGISTRY.spec("refund"), run.snapshot, run.results, now_ms=0)
