"""``validate_manifest`` and ``parse_manifest``: a document in, a :class:`Manifest` or every
problem out. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.core.agents import Durability, EffectDecl
from runplane.core.canonical import canonical_bytes, sha256_hex
from runplane.core.manifest._model import (
    API_VERSION,
    KINDS,
    NAME,
    Approval,
    Checker,
    LoopSpec,
    Manifest,
    ManifestError,
    Model,
    Problem,
    Source,
    ToolStep,
    type_name,
)
from runplane.core.manifest._plan import parse_plan
from runplane.core.manifest._sections import (
    approval_section,
    input_section,
    model_section,
    tools_section,
)
from runplane.core.manifest._sources import parse_output, parse_steps, template
from runplane.core.plan import Plan


def manifest_digest(doc: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the manifest's canonical JSON: the whole agent, in one value."""
    return sha256_hex(canonical_bytes(doc))


def validate_manifest(doc: Any) -> list[Problem]:
    """Every reason ``doc`` (a decoded YAML/JSON document) is not a valid manifest; [] if valid."""
    return _parse(doc)[1]


def parse_manifest(doc: Any, origin: str = "manifest") -> Manifest:
    """The validated ``Manifest``, or ``ManifestError`` listing every problem."""
    manifest, problems = _parse(doc)
    if problems or manifest is None:
        raise ManifestError(problems or [Problem("", "invalid manifest")], origin)
    return manifest


def _parse(doc: Any) -> tuple[Manifest | None, list[Problem]]:
    c = Checker()
    try:
        digest = manifest_digest(doc)
    except (TypeError, ValueError) as exc:
        # YAML can decode dates, sets and NaN: none of them has a canonical JSON form.
        return None, [Problem("", f"is not a JSON document: {exc}")]
    top = c.fields(doc, "", ("apiVersion", "kind", "metadata", "spec"))
    if top is None:
        return None, c.problems
    name = _header(c, top)
    spec = (
        c.fields(
            top["spec"],
            "spec",
            ("durability", "execution"),
            ("input", "model", "tools", "oversight"),
        )
        if "spec" in top
        else None
    )
    if spec is None:
        return None, c.problems
    durability = (
        c.choice(spec.get("durability"), "spec.durability", [d.value for d in Durability])
        if "durability" in spec
        else None
    )
    input_schema = input_section(c, spec.get("input"))
    tools = tools_section(c, spec.get("tools", []))
    approval = approval_section(c, spec.get("oversight"))
    behaviour = _execution(c, spec, input_schema, tools, approval, name or "agent")
    if c.problems or name is None or durability is None or behaviour is None:
        return None, c.problems
    manifest = Manifest(
        name=name,
        durability=Durability(durability),
        kind=behaviour.kind,
        digest=digest,
        doc=doc,
        input_schema=input_schema,
        tools=tools,
        model=behaviour.model,
        prompt=behaviour.prompt,
        steps=behaviour.steps,
        output=behaviour.output,
        approval=approval,
        plan=behaviour.plan,
        loop=behaviour.loop,
    )
    return manifest, []


def _header(c: Checker, top: Mapping[str, Any]) -> str | None:
    """Check ``apiVersion``, ``kind`` and ``metadata``; the capability name if valid."""
    if "apiVersion" in top and top["apiVersion"] != API_VERSION:
        c.add("apiVersion", f"must be {API_VERSION!r}, got {top['apiVersion']!r}")
    if "kind" in top and top["kind"] != "Agent":
        c.add("kind", f"must be 'Agent', got {top['kind']!r}")
    # A missing section is reported once, above; its own fields are not reported missing again.
    meta = (
        c.fields(top["metadata"], "metadata", ("name",), ("description", "labels"))
        if "metadata" in top
        else None
    )
    name = (
        c.string(meta.get("name"), "metadata.name", NAME, "capability name")
        if meta and "name" in meta
        else None
    )
    if meta and "description" in meta and not isinstance(meta["description"], str):
        c.add("metadata.description", f"must be a string, got {type_name(meta['description'])}")
    if (
        meta
        and "labels" in meta
        and not (
            isinstance(meta["labels"], Mapping)
            and all(isinstance(v, str) for v in meta["labels"].values())
        )
    ):
        c.add("metadata.labels", "must be a mapping of strings")
    return name


@dataclass(frozen=True)
class _Behaviour:
    """What ``spec.execution`` declares, once its kind is known."""

    kind: str
    model: Model | None = None
    prompt: str | None = None
    steps: tuple[ToolStep, ...] = ()
    output: Mapping[str, Source] | None = None
    plan: Plan | None = None
    loop: LoopSpec | None = None


_KIND_FIELDS: Final = {
    "generate": {"kind", "prompt"},
    "generate-then-approve": {"kind", "prompt", "then"},
    "tool-sequence": {"kind", "steps", "output"},
    "plan": {"kind", "nodes", "output"},
    "agent-loop": {"kind", "instructions", "tools", "budget", "memory", "mode"},
}


def _execution(
    c: Checker,
    spec: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    tools: tuple[EffectDecl, ...],
    approval: Approval | None,
    name: str,
) -> _Behaviour | None:
    """``spec.execution`` checked against its kind; None when the kind is missing or unknown."""
    execution = (
        c.fields(
            spec["execution"],
            "spec.execution",
            ("kind",),
            (
                "prompt",
                "then",
                "steps",
                "output",
                "nodes",
                "instructions",
                "tools",
                "budget",
                "memory",
                "mode",
            ),
        )
        if "execution" in spec
        else None
    )
    if execution is None or "kind" not in execution:
        return None
    kind = c.choice(execution["kind"], "spec.execution.kind", KINDS)
    if kind is None:
        return None
    allowed = _KIND_FIELDS[kind]
    for key in execution:
        if key not in allowed:
            c.add(
                f"spec.execution.{key}",
                f"not a field of kind {kind!r} (allowed: {', '.join(sorted(allowed))})",
            )
    tool_names = {d.name for d in tools}
    if kind in ("generate", "generate-then-approve"):
        return _generating(c, kind, spec, execution, schema, tool_names, approval)
    if kind == "plan":
        if "model" in spec or approval is not None:
            c.add("spec", "kind 'plan' takes no model and no approval (its nodes do the work)")
        # Any durability: a checkpointed run's commissions name the same child in every era
        # (engine/commission.py), so a restored plan starts no second child.
        plan, output = parse_plan(c, name, execution, schema, tools)
        return _Behaviour("plan", output=output, plan=plan)
    if kind == "agent-loop":
        return _agent_loop(c, spec, execution, schema, tool_names, approval)
    return _tool_sequence(c, spec, execution, schema, tool_names)


_BUDGETS: Final = ("turns", "tool_calls", "tokens")


def _agent_loop(
    c: Checker,
    spec: Mapping[str, Any],
    execution: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    tool_names: set[str],
    approval: Approval | None,
) -> _Behaviour:
    """Kind ``agent-loop``: a model, its instructions, the declared tools it may call, and a
    budget (``turns`` required: a loop with no bound on its turns is not reviewable) — or,
    ``mode: planned``, no budget (the plan the model writes first bounds the loop).
    ``memory: case``: the model may ``remember`` notes, kept on the run's case once a person
    approves the answer (``core.memory``) — so it needs ``spec.oversight.approval``, which
    is otherwise not taken (mark the tools that need one instead)."""
    model = model_section(c, spec.get("model"))
    memory = _loop_memory(c, execution.get("memory"), approval)
    instructions = template(c, execution.get("instructions"), "spec.execution.instructions", schema)
    offered = _offered(c, execution.get("tools", []), tool_names)
    mode = c.choice(execution.get("mode", "free"), "spec.execution.mode", ("free", "planned"))
    if mode == "planned":
        # The plan bounds a planned loop: one planner turn, then its nodes (the contract's
        # size limits), so a turn budget would say nothing.
        if "budget" in execution:
            c.add("spec.execution.budget", "mode 'planned' takes no budget: its plan bounds it")
        if model is None or instructions is None:
            return _Behaviour("agent-loop", model)
        return _Behaviour(
            "agent-loop", model, loop=LoopSpec(instructions, tuple(offered), mode=mode)
        )
    budget = c.fields(execution.get("budget"), "spec.execution.budget", ("turns",), _BUDGETS[1:])
    limits = {}
    if budget is not None:
        for key in _BUDGETS:
            if key in budget:
                limits[key] = c.integer(budget[key], f"spec.execution.budget.{key}", 1)
    if model is None or instructions is None or budget is None or mode is None:
        return _Behaviour("agent-loop", model)
    loop = LoopSpec(
        instructions,
        tuple(offered),
        turns=limits.get("turns"),
        tool_calls=limits.get("tool_calls"),
        tokens=limits.get("tokens"),
        memory=memory,
    )
    return _Behaviour("agent-loop", model, loop=loop)


def _offered(c: Checker, raw_tools: Any, tool_names: set[str]) -> list[str]:
    """``execution.tools``: names declared in ``spec.tools``, each once."""
    offered: list[str] = []
    if not isinstance(raw_tools, list) or not all(isinstance(t, str) for t in raw_tools):
        c.add("spec.execution.tools", "must be a list of tool names from spec.tools")
        return offered
    for i, tool in enumerate(raw_tools):
        if tool not in tool_names:
            c.add(f"spec.execution.tools[{i}]", f"{tool!r} is not declared in spec.tools")
        elif tool in offered:
            c.add(f"spec.execution.tools[{i}]", f"{tool!r} is offered twice")
        else:
            offered.append(tool)
    return offered


def _loop_memory(c: Checker, memory: Any, approval: Approval | None) -> bool:
    """Whether an agent-loop keeps ``memory: case`` — which needs the answer's approval, and
    is the one reason such a loop takes an approval of its answer."""
    if memory is not None and memory != "case":
        c.add("spec.execution.memory", "the one memory a loop keeps is 'case'")
    if memory == "case" and approval is None:
        c.add(
            "spec.execution.memory",
            "memory is formed after approval: memory: case needs spec.oversight.approval",
        )
    if approval is not None and memory != "case":
        c.add(
            "spec.oversight.approval.required",
            "kind 'agent-loop' takes no approval of its answer (unless it keeps memory: case):"
            " mark the tools that need one",
        )
    return bool(memory == "case")


def _generating(
    c: Checker,
    kind: str,
    spec: Mapping[str, Any],
    execution: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    tool_names: set[str],
    approval: Approval | None,
) -> _Behaviour:
    """Kinds ``generate`` and ``generate-then-approve``: a model, a prompt, ``then`` steps."""
    model = model_section(c, spec.get("model"))
    prompt = template(c, execution.get("prompt"), "spec.execution.prompt", schema)
    steps = parse_steps(
        c,
        execution.get("then", []),
        "spec.execution.then",
        tool_names,
        ("input", "generation"),
        schema,
        [],
    )
    if kind == "generate" and approval is not None:
        c.add(
            "spec.oversight.approval.required",
            "kind 'generate' takes no approval: use kind 'generate-then-approve'",
        )
    if kind == "generate-then-approve" and approval is None and not _approval_problems(c):
        c.add(
            "spec.oversight.approval.required",
            "kind 'generate-then-approve' needs an approval with required: true",
        )
    return _Behaviour(kind, model, prompt, steps)


def _tool_sequence(
    c: Checker,
    spec: Mapping[str, Any],
    execution: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    tool_names: set[str],
) -> _Behaviour:
    """Kind ``tool-sequence``: the steps in order, then the output."""
    steps: tuple[ToolStep, ...] = ()
    step_ids: list[str] = []
    if "model" in spec:
        c.add("spec.model", "kind 'tool-sequence' makes no model call: remove the model")
    if "steps" not in execution:
        c.add("spec.execution", "missing required field 'steps' for kind 'tool-sequence'")
    else:
        steps = parse_steps(
            c,
            execution["steps"],
            "spec.execution.steps",
            tool_names,
            ("input",),
            schema,
            step_ids,
        )
        if not steps and isinstance(execution["steps"], list) and not execution["steps"]:
            c.add("spec.execution.steps", "needs at least one step")
    output = parse_output(c, execution.get("output"), set(step_ids), schema)
    return _Behaviour("tool-sequence", steps=steps, output=output)


def _approval_problems(c: Checker) -> bool:
    """Whether the approval section already has a problem reported (do not pile on)."""
    return any(p.path.startswith("spec.oversight") for p in c.problems)
