"""A signal is untrusted unless the deployment policy trusts its sender (issue 15 item 1).

``trusted_signals`` (per agent) names an authenticated principal, a signal name, or both; a
signal it covers is labelled trusted at the source, its provenance still names the sender.
The sink gate then admits a value derived from it to a mutating sink, and refuses the same
value from any other sender. The label is decided once, when the signal is recorded: a replay
serves it from the journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from runplane.cli import app
from runplane.core import AgentRegistry, AgentSpec, StepCtx, replay_history
from runplane.core.policy import AgentPolicy, SignalTrust, parse_policy
from runplane.core.releases import SinkRefused
from runplane.errors import ConfigError
from runplane.testing import Driver
from runplane.wire import RunStatus, Trust

POLICY = """
sinks:
  "tool://pay": {mutating: true}
agents:
  payer:
    trusted_signals:
      - {name: pay_to, sender: alice}
      - {sender: ops-bot}
"""


async def pays_where_told(ctx: StepCtx, input: Any) -> Any:
    to = await ctx.wait_signal("pay_to")
    try:
        return await ctx.tool("pay", {"to": to, "amount": 5})
    except SinkRefused as exc:
        return {"refused": exc.type}


SPEC = AgentRegistry().register(AgentSpec("payer", pays_where_told), lint=False)


def _driver(policy: str = POLICY) -> tuple[Driver, list[Any]]:
    paid: list[Any] = []

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        paid.append(args["to"])
        return {"paid": args["to"]}

    driver = Driver(
        SPEC,
        tools={"pay": pay},
        policy=parse_policy(policy),
    )
    return driver, paid


@pytest.mark.parametrize(
    ("sender", "trusted"),
    [("alice", True), ("ops-bot", True), ("mallory", False), (None, False)],
)
def test_the_gate_admits_a_signal_to_a_mutating_sink_only_from_a_trusted_sender(
    sender: str | None, trusted: bool
) -> None:
    driver, paid = _driver()
    driver.run("payer", {}, session_id="s")
    run = driver.signal("s", "pay_to", "acct-42", sent_by=sender)
    assert run.status is RunStatus.COMPLETED, run.error
    [got] = [e for e in run.results.values() if e.family == "signal"]
    assert got.label is not None
    assert got.label.trust is (Trust.TRUSTED if trusted else Trust.UNTRUSTED)
    if sender is not None:  # trusted or not, the provenance names who sent it
        assert f"principal/{sender}" in got.label.provenance
    if trusted:
        assert paid == ["acct-42"] and run.output == {"paid": "acct-42"}
        [rec] = [r for r in run.journal if r.family == "signal" and r.attrs.get("trusted_by")]
        assert rec.attrs["trusted_by"] == driver.policy.digest  # type: ignore[union-attr]
    else:
        assert paid == [] and run.output == {"refused": "SinkRefused"}
    replay = replay_history(SPEC, run.snapshot, run.results)
    assert replay.divergence is None and replay.live_calls == 0 and replay.output == run.output


def test_a_rule_for_another_signal_name_does_not_trust_this_one() -> None:
    driver, paid = _driver(POLICY.replace("name: pay_to", "name: other"))
    driver.run("payer", {}, session_id="s")
    run = driver.signal("s", "pay_to", "acct-42", sent_by="alice")
    assert run.output == {"refused": "SinkRefused"} and paid == []


def test_without_a_policy_a_signal_stays_untrusted() -> None:
    driver, paid = _driver("sinks: {}\n")
    driver.run("payer", {}, session_id="s")
    run = driver.signal("s", "pay_to", "acct-42", sent_by="alice")
    # The pay tool is undeclared: mutating by default, so the untrusted signal is refused.
    assert run.output == {"refused": "SinkRefused"} and paid == []


def test_the_policy_parses_trusted_signals_and_refuses_empty_rules() -> None:
    policy = parse_policy(POLICY)
    rules = policy.for_agent("payer").trusted_signals
    assert rules == (SignalTrust("pay_to", "alice"), SignalTrust(None, "ops-bot"))
    for bad in ("[{}]", "[{name: ' '}]", "[{sender: x, role: y}]", "[a-string]"):
        with pytest.raises(ConfigError):
            parse_policy(f"agents: {{payer: {{trusted_signals: {bad}}}}}\n")


_names = st.sampled_from(["pay_to", "other", "go"])
_senders = st.one_of(st.none(), st.sampled_from(["alice", "bob", "ops-bot", " "]))


@given(
    rules=st.lists(
        st.tuples(st.one_of(st.none(), _names), st.one_of(st.none(), _senders)).filter(
            lambda r: r != (None, None) and r[1] != " "
        ),
        max_size=3,
    ),
    name=_names,
    sender=_senders,
)
def test_trust_needs_an_authenticated_sender_and_a_rule_covering_both(
    rules: list[tuple[str | None, str | None]], name: str, sender: str | None
) -> None:
    ap = AgentPolicy(trusted_signals=tuple(SignalTrust(n, s) for n, s in rules))
    expected = (
        sender is not None
        and sender.strip() != ""
        and any((n is None or n == name) and (s is None or s == sender) for n, s in rules)
    )
    assert ap.trusts_signal(name, sender) is expected


def test_policy_check_prints_the_trusted_signal_senders(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    result = CliRunner().invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "agent payer: trusted signals: pay_to from alice, * from ops-bot" in result.output
