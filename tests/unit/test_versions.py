"""Agent versions (runplane.core.versions, AgentRegistry, admission): several versions of a
capability side by side, each run continuing on its own version's line, new runs on the newest
or on the emitter's pin, and a run whose line is gone left parked, never failed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.versions import VersionNotDeployed, line_of, newest, resolve, version_key
from runplane.testing import Driver, FakeClock
from runplane.wire import AdmissionRequest, JournalKind, RunStatus
from services.admission.decide import Admitted, CapabilitySpec, Position, Refused, decide
from services.executor.versions import not_deployed


def _agent(version: str, tail: str) -> AgentSpec:
    reg = AgentRegistry()

    @reg.agent("flow", version=version, tools=["a", "b", "c"])
    async def flow(ctx: StepCtx, value: Any) -> str:
        await ctx.tool("a", {})
        await ctx.approval("go?", {}, role="ops")
        if version == "1.1" and ctx.patched("c-instead"):
            await ctx.tool("c", {})
            return "1.1"
        await ctx.tool(tail, {})
        return version

    return reg.spec("flow")


V1, V2, V11 = _agent("1", "b"), _agent("2", "c"), _agent("1.1", "b")


def test_resolution_keeps_a_run_on_its_line() -> None:
    assert resolve(["1", "2"], None) == "2"
    assert resolve(["1", "2"], "1") == "1"
    assert resolve(["1.1", "2"], "1") == "1.1"
    assert resolve(["1.1", "1.10", "1.9"], "1.2") == "1.10"
    with pytest.raises(VersionNotDeployed, match="deployed: 2"):
        resolve(["2"], "1")
    assert newest([]) is None and line_of("3.4.5") == "3"


@given(st.lists(st.integers(0, 30), min_size=1, max_size=4))
def test_version_order_is_numeric(parts: list[int]) -> None:
    v = ".".join(map(str, parts))
    bumped = ".".join(map(str, [*parts[:-1], parts[-1] + 1]))
    assert version_key(v) < version_key(bumped)
    assert resolve([v, bumped], v) == v and resolve([v, bumped], None) == bumped


def test_the_registry_hosts_versions_side_by_side() -> None:
    reg = AgentRegistry([V1, V2])
    assert reg.spec("flow") is V2 and reg["flow"] is V2  # the newest, as before
    assert reg.spec_for("flow", "1") is V1 and reg.spec_for("flow", None) is V2
    assert [s.version for s in reg.versions("flow")] == ["1", "2"]
    assert all(len(s.code_digest() or "") == 64 for s in reg.versions("flow"))
    with pytest.raises(ValueError, match="version 1 is already registered"):

        @reg.agent("flow", version="1")
        async def another(ctx: StepCtx, value: Any) -> None:
            return None

    unversioned = AgentRegistry()

    @unversioned.agent("flow")
    async def plain(ctx: StepCtx, value: Any) -> None:
        return None

    with pytest.raises(ValueError, match="every registered version"):
        unversioned.register(V1)
    with pytest.raises(ValueError, match="dotted parts"):
        _agent("1..2", "b")


def test_parked_runs_finish_on_their_version_and_new_runs_start_on_the_newest() -> None:
    driver = Driver(AgentRegistry([V1]), tools={n: lambda a, k: {} for n in "abc"})
    driver.clock = FakeClock(1_700_000_000_000, 3)
    old = driver.run("flow", {}, session_id="s-old")
    assert old.snapshot.agent_version == "1" and old.status is RunStatus.AWAITING_HUMAN
    assert "agent_version" not in old.journal[0].attrs  # not pinned

    driver.agents = AgentRegistry([V1, V2])  # version 2 deployed beside 1
    driver.crash("s-old")
    new = driver.decide(driver.run("flow", {}, session_id="s-new").session_id, "APPROVED")
    assert (new.snapshot.agent_version, new.output) == ("2", "2")
    assert driver.decide("s-old", "APPROVED").output == "1"

    # Only 2 deployed: a parked v1 run is stranded (the executor leaves it parked); 1.1
    # replacing 1 serves it again, through the patched branch.
    driver.agents = AgentRegistry([V1])
    parked = driver.run("flow", {}, session_id="s-parked")
    assert not_deployed(AgentRegistry([V2]), parked.snapshot) is not None
    assert not_deployed(AgentRegistry([V11, V2]), parked.snapshot) is None
    driver.agents = AgentRegistry([V11, V2])
    driver.crash("s-parked")
    done = driver.decide("s-parked", "APPROVED")
    assert (done.output, done.snapshot.agent_version) == ("1.1", "1.1")


def _caps(*versions: str) -> dict[str, CapabilitySpec]:
    return {"flow": CapabilitySpec(None, versions=versions)}


def _request(pin: str | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        admission_key="k1",
        capability="flow",
        input_json="{}",
        tenant="acme",
        initiator="alice",
        agent_version=pin,
    )


def test_admission_starts_new_runs_on_the_newest_or_the_pinned_line() -> None:
    pos = Position("admission", 0, 1)
    for caps, pin, want in (
        (_caps("1", "2"), None, None),  # the executor starts it on the newest it hosts
        (_caps("1", "2"), "1", "1"),
        (_caps("1.1", "2"), "1", "1"),  # the executor resolves the line: 1.1
        ({"flow": CapabilitySpec(None)}, None, None),
    ):
        d = decide(None, "k1", pos, _request(pin), caps, 1)
        assert isinstance(d, Admitted) and d.start.agent_version == want
        assert d.journal.kind is JournalKind.RUN_ADMITTED
        assert d.journal.attrs.get("agent_version") == want
    for caps, pin in ((_caps("2"), "1"), ({"flow": CapabilitySpec(None)}, "1")):
        refused = decide(None, "k1", pos, _request(pin), caps, 1)
        assert isinstance(refused, Refused) and refused.reply.reason is not None
        assert "flow" in refused.reply.reason


def test_the_inventory_counts_runs_per_version_and_names_stranded_ones() -> None:
    from runplane.core.versions import inventory

    rows = inventory(
        {"flow": {"1.1": "d11", "2": "d2"}, "plain": {None: "dp"}},
        [("flow", "1"), ("flow", "1"), ("flow", "2"), ("plain", None), ("gone", "3")],
    )
    got = {
        (r.capability, r.version): (r.deployed, r.in_flight, r.served_by, r.stranded) for r in rows
    }
    assert got == {
        ("flow", "1"): (False, 2, "1.1", False),
        ("flow", "1.1"): (True, 0, "1.1", False),
        ("flow", "2"): (True, 1, "2", False),
        ("plain", None): (True, 1, None, False),
        ("gone", "3"): (False, 1, None, True),
    }
    only_2 = inventory({"flow": {"2": "d2"}}, [("flow", "1")])
    assert [(r.version, r.stranded) for r in only_2] == [("1", True), ("2", False)]


def test_a_pinned_run_starts_on_the_newest_of_its_line() -> None:
    driver = Driver(AgentRegistry([V11, V2]), tools={n: lambda a, k: {} for n in "abc"})
    run = driver.decide(driver.run("flow", {}, agent_version="1").session_id, "APPROVED")
    assert (run.snapshot.agent_version, run.output) == ("1.1", "1.1")
    assert run.journal[0].attrs["agent_version"] == "1"  # the pin, in the chain


def test_replay_testing_picks_the_version_that_would_serve_the_run() -> None:
    from runplane.core.engine import ReplayResult, replay_with
    from runplane.core.recording import Recording

    driver = Driver(AgentRegistry([V1]), tools={n: lambda a, k: {} for n in "abc"})
    run = driver.run("flow", {}, session_id="s-v1")  # parked on its approval, in flight
    rec = Recording(run.snapshot, run.journal, run.results)
    assert replay_with(AgentRegistry([V1, V2]), rec).ok  # on 1, not on the newest (2)
    assert replay_with(AgentRegistry([V11, V2]), rec).ok  # 1.1 replays it (patched)
    assert not replay_with(AgentRegistry([V2]), rec).ok
    stranded = replay_with(AgentRegistry([V2]), rec)
    assert stranded.result is ReplayResult.MISSING and "stay parked" in stranded.detail
