"""The engine's own check of unattended expiry: both opt-ins, or the expiry fails the approval.

``on_expiry="proceed"`` takes effect only with ``allow_unattended=True`` as well. The worklist
checks this before it sends EXPIRED_PROCEEDED (``tests/unit/test_worklist_decide.py``); the
engine checks it again when the decision arrives (``engine/approvals.py``), so a worklist bug,
an old worklist or a decision written to ``inbox`` by anyone else cannot let an approval
proceed that nobody attended. Here the decision reaches the engine directly (the Driver
delivers it as given), so only the engine's check stands between it and the agent.
"""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, ApprovalExpired, StepCtx
from runplane.testing import Driver
from runplane.wire import RunStatus

pytestmark = pytest.mark.unit


def _registry(on_expiry: str, allow_unattended: bool) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("payout")
    async def payout(ctx: StepCtx, input: Any) -> Any:
        try:
            decision = await ctx.approval(
                "pay?",
                input,
                role="finance",
                expires_in=60_000,
                on_expiry=on_expiry,
                allow_unattended=allow_unattended,
            )
        except ApprovalExpired as exc:
            return {"expired": exc.type}
        return {"approved": decision.approved, "outcome": decision.outcome}

    return reg


@pytest.mark.parametrize(
    ("on_expiry", "allow_unattended", "expected"),
    [
        ("proceed", True, {"approved": True, "outcome": "EXPIRED_PROCEEDED"}),
        # Either opt-in alone is not enough: the engine records the expiry as a failure.
        ("proceed", False, {"expired": "ApprovalExpired"}),
        ("fail", True, {"expired": "ApprovalExpired"}),
        ("fail", False, {"expired": "ApprovalExpired"}),
    ],
)
def test_an_unattended_expiry_proceeds_only_with_both_opt_ins(
    on_expiry: str, allow_unattended: bool, expected: dict[str, Any]
) -> None:
    driver = Driver(_registry(on_expiry, allow_unattended))
    run = driver.run("payout", {"amount": 5})
    assert run.status is RunStatus.AWAITING_HUMAN
    run = driver.decide(run.session_id, "EXPIRED_PROCEEDED", by=())
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == expected
    assert driver.verify(run.session_id).ok
