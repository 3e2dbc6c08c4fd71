"""Compilation: a manifest's behaviour as an agent function. Everything goes through
``StepCtx``, so every model call, tool call and decision is an ordinary journaled effect."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runplane.core.agents import AgentFn, AgentSpec
from runplane.core.canonical import canonical_json
from runplane.core.ctx import StepCtx
from runplane.core.effect import Decision, Effect, EffectError, Op
from runplane.core.loop import LoopBudget
from runplane.core.manifest._model import PLACEHOLDER, Manifest, Source, ToolStep
from runplane.core.manifest._parse import parse_manifest
from runplane.core.manifest._plan import plan_contract
from runplane.core.memory import keep_approved
from runplane.core.plan import MISSING, lookup, parse_path


def compile_manifest(doc: Any, origin: str = "manifest") -> AgentSpec:
    """An ``AgentSpec`` running the manifest; ``ManifestError`` if it does not validate."""
    manifest = parse_manifest(doc, origin)
    return AgentSpec(
        capability=manifest.name,
        fn=_agent_fn(manifest),
        durability=manifest.durability,
        input_schema=manifest.input_schema,
        effects={d.name: d for d in manifest.tools},
        digest=manifest.digest,
        models=frozenset({manifest.model.provider} if manifest.model else ()),
    )


def _agent_fn(m: Manifest) -> AgentFn:
    async def declarative_agent(ctx: StepCtx, input: Any) -> Any:
        # First effect of every run: which agent this is. The digest is in the witness, so a
        # replay under another manifest diverges here, at call_seq 0.
        record = {"manifest": m.name, "digest": m.digest, "kind": m.kind}
        await Effect("manifest", f"manifest:{m.name}", record, Op.OBSERVE, {"fn": lambda: record})
        if m.kind == "generate":
            return {"text": await _generate(ctx, m, input)}
        if m.kind == "generate-then-approve":
            return await _generate_then_approve(ctx, m, input)
        if m.kind == "plan":
            return await _plan(ctx, m, input)
        if m.kind == "agent-loop":
            return await _agent_loop(ctx, m, input)
        return await _tool_sequence(ctx, m, input)

    # The registry tells agents apart by qualified name: two manifests under one capability
    # are refused, the same manifest registered again replaces itself.
    declarative_agent.__qualname__ = f"manifest:{m.name}@{m.digest[:16]}"
    return declarative_agent


async def _generate(ctx: StepCtx, m: Manifest, input: Any) -> str:
    assert m.model is not None and m.prompt is not None  # guaranteed by validation for these kinds
    generation = await ctx.generate(
        m.model.provider, m.model.name, render(m.prompt, input), **dict(m.model.params)
    )
    return str(generation.text)


# The patch marker of "a declarative approval registers its obligation": a run recorded
# before it replays its approval as it was (no deadline at that slot), a new run registers.
OBLIGATION_PATCH = "declarative-approval-obligation"


async def _approve(ctx: StepCtx, m: Manifest, input: Any, answer: Any) -> Decision:
    """The declared approval. With ``expires_in`` and a case, the run first registers the
    approval as an obligation of its case (due ``expires_in`` on the declared calendar), and
    the task expires when the obligation is due: the case shows the promise, a breach opens
    its follow-up, and a person's decision in time meets it."""
    a = m.approval
    assert a is not None
    question = render(a.question, input) if a.question else f"Approve the answer of {m.name}?"
    expires_in = a.expires_in_ms
    obligation = None
    if a.expires_rule is not None and ctx.case_id is not None and ctx.patched(OBLIGATION_PATCH):
        obligation = f"approval:{m.name}:{ctx.run_id}"
        due = await ctx.deadline(obligation, a.expires_rule, calendar=a.calendar, owner_role=a.role)
        expires_in = max(1, int(due) - ctx.now())  # the task's expiry is the obligation's
    decision: Decision = await ctx.approval(
        question,
        answer,
        role=a.role,
        approvals=a.approvals,
        expires_in=expires_in,
        on_expiry=a.on_expiry,
        allow_unattended=a.allow_unattended,
        escalate_to=a.escalate_to,
    )
    if obligation is not None and decision.decided_by:
        await _meet(ctx, obligation)
    return decision


async def _meet(ctx: StepCtx, obligation: str) -> None:
    """People decided: the obligation is met — unless it breached first (decided at or after
    its due instant, or after an escalation), which the case already records."""
    try:
        await ctx.meet_deadline(obligation)
    except EffectError as exc:
        if exc.type != "CaseRefused":
            raise


async def _generate_then_approve(ctx: StepCtx, m: Manifest, input: Any) -> dict[str, Any]:
    text = await _generate(ctx, m, input)
    decision = await _approve(ctx, m, input, {"text": text})
    if not decision.approved:
        return {"status": "rejected", "text": text, "comment": decision.comment}
    scope: dict[str, Any] = {"input": input, "generation": {"text": text}}
    for step in m.steps:
        scope[step.id] = await _call(ctx, m, step, scope)
    return {
        "status": "approved",
        "text": text,
        "decided_by": list(decision.decided_by),
        "steps": {s.id: scope[s.id] for s in m.steps},
    }


async def _tool_sequence(ctx: StepCtx, m: Manifest, input: Any) -> Any:
    scope: dict[str, Any] = {"input": input}
    ask_at = m.approve_before if m.approval is not None else None
    for i, step in enumerate(m.steps):
        if i == ask_at:
            decision = await _approve(
                ctx, m, input, {"steps": _done(m, scope), "next": [s.id for s in m.steps[i:]]}
            )
            if not decision.approved:
                return {"status": "rejected", "comment": decision.comment, "steps": _done(m, scope)}
        scope[step.id] = await _call(ctx, m, step, scope)
    output = (
        _done(m, scope)
        if m.output is None
        else {k: resolve(src, scope, f"output.{k}") for k, src in m.output.items()}
    )
    if ask_at == len(m.steps):
        decision = await _approve(ctx, m, input, output)
        if not decision.approved:
            return {"status": "rejected", "comment": decision.comment, "steps": _done(m, scope)}
    return output


async def _plan(ctx: StepCtx, m: Manifest, input: Any) -> Any:
    """Kind ``plan``: the plan runs (each ready set fanned out); then the output mapping."""
    assert m.plan is not None  # parsed with the kind
    outputs = await ctx.run_plan(m.plan, input, contract=plan_contract(m.plan, m.tools))
    if m.output is None:
        return outputs
    scope = {"input": input, **outputs}
    return {k: resolve(src, scope, f"output.{k}") for k, src in m.output.items()}


async def _agent_loop(ctx: StepCtx, m: Manifest, input: Any) -> dict[str, Any]:
    """Kind ``agent-loop``: ``ctx.agent_loop`` over the declared tools → how it ended."""
    assert m.model is not None and m.loop is not None  # parsed with the kind
    spec = m.loop
    if spec.mode == "planned":
        return await _planned_loop(ctx, m, input)
    result = await ctx.agent_loop(
        m.model.provider,
        m.model.name,
        render(spec.instructions, input),
        input,
        tools=spec.tools,
        budget=LoopBudget(turns=spec.turns, tool_calls=spec.tool_calls, tokens=spec.tokens),
        params=dict(m.model.params),
        remember=spec.memory,
    )
    out: dict[str, Any] = {
        "status": str(result.status),
        "text": result.text,
        "turns": result.turns,
        "calls": [c.call.name for c in result.calls],
        "refused": [c.call.name for c in result.refused],
    }
    if result.exhausted is not None:
        out["exhausted"] = str(result.exhausted)
    if spec.memory:  # memory after approval: the notes are asked with the answer, kept on yes
        held = [n.text for n in result.notes]
        decision = await _approve(ctx, m, input, {"text": result.text, "notes": held})
        kept = await keep_approved(ctx, result.notes, decision)
        out.update(approved=decision.approved, notes=held, notes_kept=kept)
    return out


async def _planned_loop(ctx: StepCtx, m: Manifest, input: Any) -> dict[str, Any]:
    """Kind ``agent-loop`` with ``mode: planned``: ``ctx.planned_loop`` → how it ended."""
    assert m.model is not None and m.loop is not None  # parsed with the kind
    result = await ctx.planned_loop(
        m.model.provider,
        m.model.name,
        render(m.loop.instructions, input),
        input,
        tools=m.loop.tools,
        params=dict(m.model.params),
    )
    out: dict[str, Any] = {
        "status": str(result.status),
        "plan": None if result.plan is None else result.plan.hash,
        "nodes": [n.node for n in result.nodes if n.ok],
        "refused": [n.node for n in result.refused],
        "output": result.output,
    }
    if result.problems:
        out["problems"] = list(result.problems)
    failed = [n for n in result.nodes if not n.ok]
    if failed:
        out["failed"] = {n.node: f"{n.error_type}: {n.error}" for n in failed}
    return out


def _done(m: Manifest, scope: Mapping[str, Any]) -> dict[str, Any]:
    return {s.id: scope[s.id] for s in m.steps if s.id in scope}


async def _call(ctx: StepCtx, m: Manifest, step: ToolStep, scope: Mapping[str, Any]) -> Any:
    args = {name: resolve(src, scope, f"{step.id}.args.{name}") for name, src in step.args.items()}
    decl = next(d for d in m.tools if d.name == step.tool)
    # Derived from the run: every attempt, replay and era presents the same key to the peer.
    key = f"{m.name}/{ctx.run_id}/{step.id}" if decl.mutating else None
    return await ctx.tool(step.tool, args, idempotency_key=key)


def resolve(source: Source, scope: Mapping[str, Any], where: str = "argument") -> Any:
    """The value a source names in ``scope`` (input, generation, step outputs by id);
    ``EffectError("SourceMissing")`` when the value does not have that path (the run fails
    with the position, never with a KeyError from inside the runtime)."""
    if source.root == "const":
        return source.value
    value = lookup(scope[source.root], source.path)
    if value is MISSING:
        raise EffectError(
            "SourceMissing", f"{where}: {source.describe()} does not exist in the value"
        )
    return value


def render(template: str, input: Any) -> str:
    """Fill ``{{ input.a.b }}`` placeholders; strings as themselves, other values as canonical JSON."""

    def fill(match: re.Match[str]) -> str:
        expr = match.group(1)
        parts = parse_path("$" + expr[len("input") :])
        assert parts is not None  # validated
        value = resolve(Source("input", parts), {"input": input}, f"placeholder {match.group(0)}")
        return value if isinstance(value, str) else canonical_json(value)

    return PLACEHOLDER.sub(fill, template)
