"""Effect groups through the in-memory driver: commit, invariants, abandonment, doubt, crashes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    EffectError,
    Recovery,
    StepCtx,
    replay_history,
)
from runplane.core.groups import GroupAbandoned, GroupRefused, Invariant, InvariantFailed
from runplane.testing import Driver
from runplane.wire import RunStatus

DECLS = (
    EffectDecl("reserve", mutating=True, recovery=Recovery.RETRY),
    EffectDecl("charge", mutating=True, recovery=Recovery.REQUIRES_OPERATOR),
    # An undo that must be applied once even across a crash mid-call: reconcile with a probe.
    EffectDecl("release", mutating=True, recovery=Recovery.RECONCILE, probe="released"),
    EffectDecl("released", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("refund", mutating=True, recovery=Recovery.RETRY),
    EffectDecl("notify", mutating=True, recovery=Recovery.RETRY),
    EffectDecl("check", mutating=False, recovery=Recovery.RETRY),
)


class World:
    """The peers: holds, charges and mails that exist, and every call in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.holds: dict[str, int] = {}  # hold id -> times released
        self.charges: dict[str, int] = {}
        self.mails: list[str] = []
        self.fail_notify = False

    def tools(self) -> dict[str, Any]:
        return {
            "reserve": self.reserve,
            "charge": self.charge,
            "release": self.release,
            "released": self.released,
            "refund": self.refund,
            "notify": self.notify,
            "check": self.check,
        }

    def check(self, args: dict[str, Any], key: str | None) -> bool:
        self.log.append(("check", args))
        return True

    def reserve(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        hold = f"h-{args['sku']}"
        self.holds.setdefault(hold, 0)
        self.log.append(("reserve", hold))
        return {"hold": hold, "qty": args["qty"]}

    def charge(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        charge_id = f"c-{args['amount']}"
        self.charges[charge_id] = 0
        self.log.append(("charge", charge_id))
        return {"charge_id": charge_id}

    def release(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.holds[args["hold"]] += 1
        self.log.append(("release", args["hold"]))
        return {"released": args["hold"]}

    def released(self, args: dict[str, Any], key: str | None) -> Any:
        # The probe: has this hold been released? (None = never happened)
        return {"released": args["hold"]} if self.holds.get(args["hold"], 0) > 0 else None

    def refund(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.charges[args["charge_id"]] += 1
        self.log.append(("refund", args["charge_id"]))
        return {"refunded": args["charge_id"]}

    def notify(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if self.fail_notify:
            raise RuntimeError("mail server said no")
        self.mails.append(args["text"])
        self.log.append(("notify", args["text"]))
        return {"sent": True}


def _spec(fn: Any, durability: Durability = Durability.REPLAYABLE) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, durability, None, {d.name: d for d in DECLS}), lint=False
    )


def _release(out: Any) -> tuple[str, dict[str, Any]]:
    return ("release", {"hold": out["hold"]})


def _group_records(run: Any) -> list[dict[str, Any]]:
    """The group decisions as journaled (family "group"), in order."""
    return [json.loads(e.value_json) for _, e in sorted(run.results.items()) if e.family == "group"]


async def checkout(ctx: StepCtx, input: Any) -> Any:
    async with ctx.group("checkout", ["inventory", "notify"]) as g:
        hold = await g.reversible(
            "inventory", "reserve", {"sku": input["sku"], "qty": input["qty"]}, undo=_release
        )
        g.deferred("notify", "notify", {"text": "order confirmed"})
        await ctx.tool("check", {"hold": hold["hold"]})
        sent = await g.commit(
            invariants=[("the hold covers the order", hold["qty"] >= input["want"])]
        )
    return {"hold": hold["hold"], "sent": sent}


def test_commit_runs_deferred_members_only_after_the_invariants_hold() -> None:
    world = World()
    spec = _spec(checkout)
    driver = Driver(spec, tools=world.tools())
    run = driver.run("t", {"sku": "a", "qty": 2, "want": 2})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"hold": "h-a", "sent": {"notify": {"sent": True}}}
    # The deferred member did not run when it was declared: the check came first.
    assert [op for op, _ in world.log] == ["reserve", "check", "notify"]
    assert world.holds == {"h-a": 0}
    events = _group_records(run)
    assert [e["event"] for e in events] == ["open", "commit"]
    assert events[0]["members"] == ["inventory", "notify"]
    assert events[1]["invariants"] == {"the hold covers the order": True} and events[1][
        "deferred"
    ] == ["notify"]
    assert driver.verify(run.session_id).ok
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert report.output == run.output and report.live_calls == 0


def test_a_failed_invariant_reverses_and_never_runs_the_deferred_member() -> None:
    world = World()
    driver = Driver(_spec(checkout), tools=world.tools())
    run = driver.run("t", {"sku": "a", "qty": 1, "want": 3})
    assert run.status is RunStatus.FAILED
    assert (
        run.error is not None
        and run.error.startswith("InvariantFailed: ")
        and "the hold covers the order" in run.error
    )
    assert world.holds == {"h-a": 1} and world.mails == []
    events = _group_records(run)
    assert [e["event"] for e in events] == ["open", "abandon", "abandoned"]
    assert events[1]["reverse"] == ["inventory"] and events[1]["not_run"] == ["notify"]
    assert events[1]["invariants"] == {"the hold covers the order": False}
    assert events[2]["reversed"] == ["inventory"]


def test_the_agent_can_catch_the_abandonment_and_read_what_was_reversed() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            async with ctx.group("g", ["a", "b", "mail"]) as g:
                await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
                await g.reversible("b", "reserve", {"sku": "b", "qty": 1}, undo=_release)
                g.deferred("mail", "notify", {"text": "x"})
                await g.commit([Invariant("enough", False)])
        except InvariantFailed as exc:
            return {
                "reversed": list(exc.reversed),
                "not_run": list(exc.not_run),
                "failed": list(exc.invariants),
            }
        return None

    world = World()
    run = Driver(_spec(agent), tools=world.tools()).run("t", {})
    assert run.output == {"reversed": ["b", "a"], "not_run": ["mail"], "failed": ["enough"]}
    assert [e for e in world.log if e[0] == "release"] == [("release", "h-b"), ("release", "h-a")]


async def three_then_boom(ctx: StepCtx, input: Any) -> Any:
    async with ctx.group("g", ["a", "b", "c", "mail"]) as g:
        g.deferred("mail", "notify", {"text": "done"})
        for sku in ("a", "b", "c"):
            await g.reversible(sku, "reserve", {"sku": sku, "qty": 1}, undo=_release)
        raise ValueError("the price changed")
    return "unreachable"


def test_an_exception_reverses_newest_first_and_keeps_its_own_error() -> None:
    world = World()
    run = Driver(_spec(three_then_boom), tools=world.tools()).run("t", {})
    assert run.status is RunStatus.FAILED and run.error == "ValueError: the price changed"
    assert [h for op, h in world.log if op == "release"] == ["h-c", "h-b", "h-a"]
    assert world.mails == []
    events = _group_records(run)
    assert events[1]["reason"] == "ValueError: the price changed" and events[1]["reverse"] == [
        "c",
        "b",
        "a",
    ]


def test_leaving_the_block_without_commit_abandons_and_says_so() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("g", ["a"]) as g:
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
        return "forgot"

    world = World()
    run = Driver(_spec(agent), tools=world.tools()).run("t", {})
    assert run.status is RunStatus.FAILED
    assert (
        run.error is not None
        and run.error.startswith("GroupAbandoned: ")
        and "without commit" in run.error
    )
    assert world.holds == {"h-a": 1}


@pytest.mark.parametrize(
    "misuse", ["undeclared", "twice", "after_commit", "outside_block", "bad_invariant", "bad_undo"]
)
def test_misuse_is_refused_and_abandons_what_stands(misuse: str) -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        g = ctx.group("g", ["a", "b"])
        if misuse == "outside_block":
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
        async with g:
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
            if misuse == "undeclared":
                g.deferred("zzz", "notify", {"text": "x"})
            elif misuse == "twice":
                g.deferred("a", "notify", {"text": "x"})
            elif misuse == "bad_invariant":
                await g.commit([("truthy", [1])])  # type: ignore[list-item]
            elif misuse == "bad_undo":
                await g.reversible(
                    "b",
                    "reserve",
                    {"sku": "b", "qty": 1},
                    undo=lambda out: ("release", out["nope"]),
                )
            else:
                await g.commit()
        if misuse == "after_commit":
            g.deferred("b", "notify", {"text": "late"})
        return "ok"

    world = World()
    run = Driver(_spec(agent), tools=world.tools()).run("t", {})
    assert (
        run.status is RunStatus.FAILED
        and run.error is not None
        and run.error.startswith("GroupRefused: ")
    ), run.error
    assert world.mails == []
    if misuse == "outside_block":
        assert world.log == []
    elif misuse == "after_commit":
        assert world.holds == {"h-a": 0}  # committed: a later failure does not unwind
        assert "already committed" in run.error
    elif misuse == "bad_undo":
        # b happened and its undo cannot be built: left standing, on record; a is reversed.
        assert world.holds == {"h-a": 1, "h-b": 0}
        assert _group_records(run)[1]["left_standing"] == ["b"]
    else:
        assert world.holds == {"h-a": 1}


def test_group_declarations_are_validated() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        ctx.group("g", input["members"])
        return "ok"

    driver = Driver(_spec(agent))
    for members, why in (([], "at least one"), (["a", "a"], "unique"), ([""], "non-empty")):
        run = driver.run("t", {"members": members})
        assert run.status is RunStatus.FAILED and run.error is not None and why in run.error


def test_after_commit_a_deferred_failure_does_not_unwind() -> None:
    world = World()
    world.fail_notify = True
    run = Driver(_spec(checkout), tools=world.tools()).run("t", {"sku": "a", "qty": 2, "want": 1})
    assert (
        run.status is RunStatus.FAILED
        and run.error is not None
        and "mail server said no" in run.error
    )
    assert world.holds == {"h-a": 0}
    assert [e["event"] for e in _group_records(run)] == ["open", "commit"]


@pytest.mark.parametrize("durability", [Durability.REPLAYABLE, Durability.CHECKPOINTED])
@pytest.mark.parametrize("phase", ["before_act", "after_act"])
@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_crash_mid_reversal_continues_where_it_was_each_undo_once(
    durability: Durability, phase: str, at: int
) -> None:
    world = World()
    seen = {"release": 0}
    crashed: list[bool] = []

    def hook(p: str, call: Any) -> bool:
        if call.target != "release" or call.family != "tool" or p != phase or crashed:
            return False
        seen["release"] += 1
        if seen["release"] == at + 1:
            crashed.append(True)
            return True
        return False

    spec = _spec(three_then_boom, durability)
    driver = Driver(spec, tools=world.tools(), crash_hook=hook)
    run = driver.run("t", {})
    assert crashed and driver.crashes >= 1
    assert run.status is RunStatus.FAILED and run.error == "ValueError: the price changed"
    assert world.holds == {"h-a": 1, "h-b": 1, "h-c": 1}  # every undo applied exactly once
    assert [h for op, h in world.log if op == "release"] == ["h-c", "h-b", "h-a"]
    assert world.mails == []
    assert driver.verify(run.session_id).ok
    if durability is Durability.REPLAYABLE:
        report = replay_history(spec, run.snapshot, dict(run.results))
        assert (
            report.live_calls == 0
            and report.status is RunStatus.FAILED
            and report.divergence is None
        )


def test_doubt_reverses_nothing_and_is_recorded() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("pay", ["hold", "payment"]) as g:
            await g.reversible("hold", "reserve", {"sku": "a", "qty": 1}, undo=_release)
            await g.reversible(
                "payment",
                "charge",
                {"amount": 5},
                undo=lambda out: ("refund", {"charge_id": out["charge_id"]}),
            )
            await g.commit()
        return "paid"

    world = World()
    crashed: list[bool] = []

    def hook(phase: str, call: Any) -> bool:
        if call.target == "charge" and phase == "after_act" and not crashed:
            crashed.append(True)
            return True
        return False

    driver = Driver(_spec(agent), tools=world.tools(), crash_hook=hook)
    run = driver.run("t", {})
    # The charge was applied but not recorded: in doubt, an operator is asked.
    assert (
        run.status is RunStatus.AWAITING_HUMAN
        and run.task is not None
        and run.task.task_id.endswith("/operator")
    )
    run = driver.decide(run.session_id, "ABANDON", comment="cannot tell")
    assert (
        run.status is RunStatus.FAILED
        and run.error is not None
        and run.error.startswith("EffectAbandoned")
    )
    assert world.holds == {"h-a": 1}  # what stood is reversed
    assert world.charges == {"c-5": 0}  # what is in doubt is not
    abandon = _group_records(run)[1]
    assert (
        abandon["event"] == "abandon"
        and abandon["in_doubt"] == ["payment"]
        and abandon["reverse"] == ["hold"]
    )


def test_a_crash_inside_the_block_is_not_an_abandonment() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("g", ["a"]) as g:
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
            decision = await ctx.approval("ok?", {}, role="ops")
            await g.commit([("approved", decision.approved)])
        return "done"

    world = World()
    driver = Driver(_spec(agent), tools=world.tools())
    run = driver.run("t", {})
    assert run.status is RunStatus.AWAITING_HUMAN
    driver.crash(run.session_id)  # GeneratorExit through the block: nothing is reversed
    assert world.holds == {"h-a": 0}
    run = driver.decide(run.session_id, "APPROVED")
    assert (
        run.status is RunStatus.COMPLETED
        and world.holds == {"h-a": 0}
        and world.log == [("reserve", "h-a")]
    )


def test_a_failed_undo_is_recorded_and_the_rest_are_still_reversed() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            async with ctx.group("g", ["a", "b"]) as g:
                await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
                await g.reversible(
                    "b",
                    "reserve",
                    {"sku": "b", "qty": 1},
                    undo=lambda out: ("refund", {"charge_id": "none"}),
                )
                await g.commit([("no", False)])
        except GroupAbandoned as exc:
            return {"reversed": list(exc.reversed), "undo_failed": sorted(exc.undo_failed)}
        return None

    world = World()
    run = Driver(_spec(agent), tools=world.tools()).run("t", {})
    assert run.output == {
        "reversed": ["a"],
        "undo_failed": ["b"],
    }  # refund of an unknown charge: KeyError
    assert world.holds == {"h-a": 1, "h-b": 0}


def test_a_replay_that_decides_differently_is_quarantined() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("g", ["a"]) as g:
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
            await g.commit([("ok", bool(input["ok"]))])
        return "done"

    async def changed(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("g", ["a"]) as g:
            await g.reversible("a", "reserve", {"sku": "a", "qty": 1}, undo=_release)
            await g.commit([("ok", not input["ok"])])
        return "done"

    world = World()
    run = Driver(_spec(agent), tools=world.tools()).run("t", {"ok": True})
    assert run.status is RunStatus.COMPLETED
    report = replay_history(_spec(changed), run.snapshot, dict(run.results))
    assert report.status is RunStatus.QUARANTINED and "group:g" in (report.divergence or "")


def test_errors_are_effect_errors_an_agent_may_catch() -> None:
    assert issubclass(InvariantFailed, GroupAbandoned) and issubclass(GroupAbandoned, EffectError)
    assert issubclass(GroupRefused, EffectError)
    exc = InvariantFailed("g", ("x",), reversed_=("a",))
    assert (
        exc.type == "InvariantFailed"
        and exc.reversed == ("a",)
        and "invariant failed: x" in exc.message
    )
