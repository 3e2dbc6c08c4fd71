"""Running a plan inside one run: ``ctx.run_plan``, ``ctx.fan_out``, ``ctx.parallel`` and
``ctx.commission``. Built on ``StepCtx`` effects only.

    plan = fan_out_plan("triage", ["risk.score", "fraud.check"], "decide")
    decision = await ctx.run_plan(plan, input, contract=Contract(agents={...}))

1. **The plan is journaled before its first node**: one effect of family ``plan``, name
   ``plan:<name>``, whose request is the plan's canonical JSON and hash (so a replay under a
   different plan diverges at once), and whose recorded value is the contract's verdict —
   with every literal and input binding whose label is not trusted (``untrusted_sources``,
   labelled as the sink gate labels: a plan is compiled from trusted input only). A refused
   plan fails here with every positioned problem (``PlanRefused``); nothing else ran.
2. **Each ready set fans out**: its nodes are issued as branches in ready order (by id) and
   joined (``engine/fanout.py``): tools and models are performed concurrently by the
   executor, agents are commissioned as child runs. A failed node fails the plan
   (``PlanNodeFailed``) after its whole wave is applied — nothing is left announced.
3. **Every argument is resolved from the journal** against its binding (``plan.resolve_args``):
   the source node's journaled output and provenance. ``propose`` lets agent code offer the
   arguments of a node (a model's tool call, say); each offered value must equal what the
   binding resolves to. A mismatch is journaled as the node's failure (``BindingViolation``)
   and raised — whatever the value's label says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runplane.core.allotments import Allotment, ask_json
from runplane.core.effect import Effect, EffectError, Op, RunCancelled
from runplane.core.jsonpaths import unwrap
from runplane.core.labels import Wrapper
from runplane.core.plan import (
    BatchStatus,
    BindingViolation,
    Contract,
    Delegation,
    Node,
    Plan,
    Quorum,
    QuorumOutcome,
    Sourced,
    Vote,
    batch_status,
    fan_out_plan,
    resolve_args,
    untrusted_sources,
    validate,
    waves,
)
from runplane.core.releases import TYPED_ERRORS
from runplane.errors import TerminalError

if TYPE_CHECKING:
    from runplane.core.ctx import StepCtx

__all__ = [
    "Proposer",
    "commission",
    "commission_effect",
    "fan_out",
    "panel",
    "parallel",
    "run_plan",
]

# (node id, outputs so far) → the arguments agent code offers for that node, or None.
Proposer = Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]


def commission_effect(
    capability: str,
    input: Any,
    delegation: Delegation | None = None,
    *,
    node: str = "",
    narrow: bool = False,
    on_parent_cancel: str = "cancel",
    budget: Allotment | float | None = None,
) -> Effect:
    """A commission as a fan-out branch: a child run of ``capability`` (provenance
    ``agent/<capability>``). ``narrow`` (no ``delegation`` given): the child runs under this
    run's own delegation narrowed to ``capability`` alone, not under it unchanged.
    ``on_parent_cancel``: the close policy — ``cancel`` (this run's cancel cancels the child)
    or ``wait`` (the child runs to its own end; the cancelled run waits for it).
    ``budget``: what of this run's remaining budget the child is allotted — a share in
    (0, 1] or amounts (``Allotment``); None: all of it, or, for one of several commissions
    dispatched together that declare none, an even part of it (``core.allotments``). A run
    whose budget bounds nothing allots nothing: the child is bounded by its policy alone."""
    if on_parent_cancel not in ("cancel", "wait"):
        raise ValueError(f"on_parent_cancel is cancel or wait, got {on_parent_cancel!r}")
    # ``Labeled`` / ``Released`` wrappers come out of the input (the child gets plain JSON)
    # and go to the sink gate, as a tool's arguments do: it judges the exact input sent.
    plain, wrapped = unwrap(input, Wrapper)
    request: dict[str, Any] = {"capability": capability, "input": plain, "node": node}
    if delegation is not None:
        request["delegation"] = delegation.to_json()
    elif narrow:  # only then: a commission without it keeps the bytes it always had
        request["narrow"] = True
    if on_parent_cancel != "cancel":  # likewise: the default is not written
        request["on_parent_cancel"] = on_parent_cancel
    if budget is not None:  # likewise
        try:
            request["budget"] = ask_json(budget)
        except TerminalError as exc:
            raise ValueError(str(exc)) from exc
    options = {"wrapped": wrapped} if wrapped else {}
    return Effect("commission", f"agent/{capability}", request, Op.BRANCH, options)


async def _dispatch(branches: Sequence[tuple[str, Effect]]) -> dict[str, Any]:
    """Issue the branches back to back, then the join; → the join's value by node id."""
    # The commissions of the set that declare no budget split what the run has left evenly
    # (``commission``: the i-th of n is allotted 1/(n-i) of what is left when it is
    # dispatched): in options, not the request, so no witness changes.
    undeclared = [n for n, e in branches if e.family == "commission" and "budget" not in e.request]
    for node, issued in branches:
        # The node id is in the request, so in the witness: each branch its own slice.
        request = {**issued.request, "node": node}
        # Alone in its ready set, a mutating call may run as an ordinary call (fanout.branch).
        options = {**issued.options, "solo": len(branches) == 1}
        if node in undeclared:
            options["split"] = len(undeclared) - undeclared.index(node)
        effect = Effect(issued.family, issued.name, request, Op.BRANCH, options)
        # Live: dispatched, not awaited; replay: the recorded outcome. A branch's failure is
        # in the join's value, as every other outcome — but a cancel is the run's: it is told
        # at a wave's first branch (a wave is dispatched in one step, and a cancel arriving
        # during the join waits for the join), so nothing of the wave is in flight.
        try:
            await effect
        except RunCancelled:
            raise
        except EffectError:
            pass
    nodes = [node for node, _ in branches]
    join = Effect("fanout", f"fanout:{','.join(nodes)}"[:200], {"nodes": nodes}, Op.JOIN)
    result: dict[str, Any] = await join
    return result


async def parallel(branches: Mapping[str, Effect]) -> BatchStatus:
    """Run effects (non-mutating tools, generations, commissions) together, by name, applied
    in name order → ``AllSucceeded`` / ``PartiallyFailed`` / ``AllFailed`` (never a success
    for partial success)."""
    joined = await _dispatch(sorted(branches.items()))
    ok = {n: r["value"] for n, r in joined.items() if r["ok"]}
    failed = {
        n: f"{r['error']['type']}: {r['error']['message']}"
        for n, r in joined.items()
        if not r["ok"]
    }
    return batch_status(ok, failed)


async def panel(
    reviewers: Sequence[str], input: Any, *, approve_at: int, reject_at: int
) -> QuorumOutcome:
    """A panel of reviewer agents, commissioned at once, each answering ``{"approve": bool,
    "comment"?}`` → the ``Quorum``'s outcome (``Split`` has no majority). A reviewer that fails
    or answers anything else casts no vote."""
    if len(set(reviewers)) != len(reviewers):
        raise EffectError("PanelRefused", "a reviewer sits on a panel once")
    quorum = Quorum(frozenset(reviewers), approve_at, reject_at)
    joined = await _dispatch(
        [(f"r{i}", commission_effect(c, input)) for i, c in enumerate(reviewers)]
    )
    for i, reviewer in enumerate(reviewers):
        answer = joined[f"r{i}"]
        value = answer.get("value")
        if answer["ok"] and isinstance(value, Mapping) and isinstance(value.get("approve"), bool):
            quorum = quorum.vote(Vote(reviewer, value["approve"], str(value.get("comment", ""))))
    return quorum.outcome


async def commission(
    capability: str,
    input: Any,
    delegation: Delegation | None = None,
    on_parent_cancel: str = "cancel",
    budget: Allotment | float | None = None,
) -> Any:
    """One child run; its output, or ``EffectError`` (``ChildFailed``, ``DelegationRefused``,
    ``BudgetExceeded``)."""
    effect = commission_effect(
        capability, input, delegation, on_parent_cancel=on_parent_cancel, budget=budget
    )
    joined = await _dispatch([("child", effect)])
    outcome = joined["child"]
    if not outcome["ok"]:
        kind, message = outcome["error"]["type"], outcome["error"]["message"]
        typed = TYPED_ERRORS.get(kind)  # SinkRefused, DelegationRefused: catchable by class
        raise EffectError(kind, message) if typed is None else typed(message)
    return outcome["value"]


def _node_effect(ctx: StepCtx, node: Node, args: dict[str, Any]) -> Effect:
    if node.kind == "agent":
        child_input = args["input"] if set(args) == {"input"} else args
        return commission_effect(node.target, child_input, node=node.id)
    if node.kind == "model":
        provider, _, model = node.target.partition("/")
        params = {k: v for k, v in args.items() if k != "prompt"}
        return ctx.generate(provider, model, args.get("prompt", ""), **params)
    return ctx.tool(node.target, args)


def _default_contract(ctx: StepCtx) -> Contract:
    """What the agent declared it calls: its tools and models; no agents (a plan that
    commissions must be given a contract that grants them)."""
    spec = ctx._rt.spec
    return Contract(
        tools=spec.tools | frozenset(spec.effects), models=frozenset(f"{m}/*" for m in spec.models)
    )


async def run_plan(
    ctx: StepCtx,
    plan: Plan,
    input: Any,
    *,
    contract: Contract | None = None,
    propose: Proposer | None = None,
) -> Any:
    """Validate, journal and run ``plan`` (see the module docstring) → the output node's value
    (``plan.output``), or every node's output by id."""
    contract = contract if contract is not None else _default_contract(ctx)
    problems = [str(p) for p in validate(plan, contract)]
    problems += [str(p) for p in untrusted_sources(plan, input, ctx.label_of)]
    verdict = await Effect(
        "plan",
        f"plan:{plan.name}",
        {"plan": plan.to_json(), "hash": plan.hash},
        Op.OBSERVE,
        {"fn": lambda: {"hash": plan.hash, "problems": problems}},
    )
    if verdict["problems"]:
        raise EffectError("PlanRefused", "; ".join(verdict["problems"])[:500])
    outputs: dict[str, Sourced] = {}
    for wave in waves(plan):
        branches = []
        for node_id in wave:
            node = plan.node(node_id)
            args = await _arguments(plan, node, input, outputs, propose)
            branches.append((node_id, _node_effect(ctx, node, args)))
        joined = await _dispatch(branches)
        for node_id in wave:
            r = joined[node_id]
            if not r["ok"]:
                raise EffectError(
                    "PlanNodeFailed",
                    f"nodes.{node_id}: {r['error']['type']}: {r['error']['message']}",
                )
            outputs[node_id] = Sourced(r["value"], frozenset(r["provenance"]))
    if plan.output is not None:
        return outputs[plan.output].value
    return {node_id: s.value for node_id, s in outputs.items()}


async def _arguments(
    plan: Plan, node: Node, input: Any, outputs: Mapping[str, Sourced], propose: Proposer | None
) -> dict[str, Any]:
    """The node's arguments from their bindings; a violation is journaled, then raised."""
    offered = (
        None if propose is None else propose(node.id, {k: s.value for k, s in outputs.items()})
    )
    try:
        return resolve_args(plan, node, input, outputs, offered)
    except BindingViolation as violation:
        reason = str(violation)

        def refuse() -> Any:
            raise EffectError("BindingViolation", reason)

        await Effect(
            "plan",
            f"plan:{plan.name}/{node.id}",
            {"refused": node.id, "arg": violation.arg},
            Op.OBSERVE,
            {"fn": refuse},
        )
        raise AssertionError(
            "unreachable: the recorded refusal raises"
        ) from None  # pragma: no cover


async def fan_out(
    ctx: StepCtx,
    branches: Sequence[str],
    aggregator: str,
    input: Any,
    *,
    contract: Contract | None = None,
    kind: str = "agent",
) -> Any:
    """``fan_out_plan(branches, aggregator)`` run as a plan: every branch gets ``input``,
    the aggregator every branch's output by node id → the aggregator's output."""
    plan = fan_out_plan(
        f"fan_out:{aggregator}"[:200].replace(":", "-"), branches, aggregator, kind=kind
    )
    grant = set(branches) | {aggregator}
    if contract is None:
        contract = (
            Contract(agents=frozenset(grant))
            if kind == "agent"
            else Contract(tools=frozenset(grant))
        )
    return await run_plan(ctx, plan, input, contract=contract)
