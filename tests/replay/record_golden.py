"""Record the golden journals replayed by ``test_golden.py``.

    .venv/bin/python tests/replay/record_golden.py

Run it only when a history format change is intended; a golden journal that stops replaying
means deployed runs would stop replaying too (change the agent under a new capability name,
or keep the old code path, instead).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import examples.plan_triage  # registers "plan.lookup", "plan.triage" and its agents
import examples.refund
import examples.triage  # noqa: F401  (registers "triage")
from runplane.core import REGISTRY
from runplane.testing import Driver, FakeClock, RunView, ScriptedProvider
from runplane.wire import to_dict
from tests.helpers import support_loop

GOLDEN = Path(__file__).parent / "golden"
# Agents of the tests' own registries (not REGISTRY): the loop's support agent.
GOLDEN_LOOP = Path(__file__).parent / "golden_loop"


def _billing() -> dict[str, Any]:
    return {
        "fetch_invoice": lambda args, key: {
            "invoice_id": args["invoice_id"],
            "amount_cents": 1250,
            "currency": "EUR",
        },
        "charge_card": lambda args, key: {
            "charge_id": "ch-golden",
            "idempotency_key": key,
            "amount_cents": args["amount_cents"],
        },
        "get_charge": lambda args, key: None,
    }


def record_refund() -> RunView:
    driver = Driver(REGISTRY, tools=_billing(), clock=FakeClock(1_700_000_000_000, step_ms=7))
    run = driver.run(
        "refund", {"invoice_id": "inv-golden", "reason": "duplicate"}, session_id="golden-refund"
    )
    return driver.decide(run.session_id, "APPROVED", by=("bob",))


def record_triage() -> RunView:
    driver = Driver(
        REGISTRY,
        providers={"openai": ScriptedProvider(["outage, clearly"], name="openai")},
        clock=FakeClock(1_700_000_000_000, step_ms=7),
        cases={"case-g": {"customer": "c-1"}},
    )
    return driver.run(
        "triage",
        {"ticket": "Nothing loads since 9:00"},
        session_id="golden-triage",
        case_id="case-g",
    )


def record_fanout() -> RunView:
    # Three read-only lookups as one ready set (branches + join), applied in ready order.
    lookup = {"scoring/slow_lookup": lambda args, key: {"i": args["i"]}}
    driver = Driver(REGISTRY, tools=lookup, clock=FakeClock(1_700_000_000_000, step_ms=7))
    return driver.run("plan.lookup", {"n": 3, "slow_s": 0}, session_id="golden-fanout")


def record_commission() -> RunView:
    # plan.triage: its plan, two commissions at once, their results, then the aggregator's.
    scoring = {
        "scoring/risk": lambda args, key: {"score": int(args["amount"]) // 10},
        "scoring/fraud": lambda args, key: {"fraud": False},
    }
    driver = Driver(REGISTRY, tools=scoring, clock=FakeClock(1_700_000_000_000, step_ms=7))
    return driver.run(
        "plan.triage", {"amount": 120, "account": "a-1"}, session_id="golden-commission"
    )


def record_loop() -> RunView:
    # ctx.agent_loop: six turns (parallel reads, an injected refund refused and answered to
    # the model, the real refund, a check, the answer), every turn and call journaled.
    driver = Driver(
        support_loop.AGENTS,
        tools=support_loop.tools(),
        providers={"scripted": support_loop.model(obey_injections=True)},
        clock=FakeClock(1_700_000_000_000, step_ms=7),
        policy=support_loop.POLICY,
    )
    return driver.run(
        "loop.support",
        {"customer_id": "c-1", "request": "refund my damaged order o-1"},
        session_id="golden-loop",
    )


def dump(run: RunView) -> dict[str, Any]:
    return {
        "snapshot": to_dict(run.snapshot),
        "journal": [to_dict(r) for r in run.journal],
        "results": [to_dict(e) for _, e in sorted(run.results.items())],
    }


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for name, run in (
        ("refund_approved", record_refund()),
        ("triage_case_deadline", record_triage()),
        ("fanout_lookup", record_fanout()),
        ("commission_triage", record_commission()),
    ):
        path = GOLDEN / f"{name}.json"
        path.write_text(json.dumps(dump(run), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path} ({len(run.journal)} records, {len(run.results)} results)")
    GOLDEN_LOOP.mkdir(exist_ok=True)
    path = GOLDEN_LOOP / "support_loop_injection.json"
    run = record_loop()
    path.write_text(json.dumps(dump(run), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(run.journal)} records, {len(run.results)} results)")


if __name__ == "__main__":
    main()
