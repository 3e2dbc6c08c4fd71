"""Properties of manifest validation: every valid manifest compiles (and runs), every mutation
that breaks a rule is refused at the position it broke."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.core.manifest import KINDS, compile_manifest, manifest_digest, validate_manifest
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import RunStatus

IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in ("input", "generation", "const")
)
JSONS = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    # kinds "plan" and "agent-loop" have their own tests (test_manifest_plan.py,
    # test_manifest_loop.py): nodes or a loop, not steps.
    kind = draw(st.sampled_from([k for k in KINDS if k not in ("plan", "agent-loop")]))
    props = draw(st.lists(IDENT, min_size=1, max_size=4, unique=True))
    schema = {
        "type": "object",
        "properties": {p: {"type": "string"} for p in props},
        "required": props,
        "additionalProperties": False,
    }
    tool_names = draw(st.lists(IDENT, min_size=1, max_size=4, unique=True))
    tools = [
        {
            "name": n,
            "mutating": draw(st.booleans()),
            "recovery": draw(st.sampled_from(["retry", "requires_operator"])),
        }
        for n in tool_names
    ]
    roots = ["input"] + (["generation"] if kind == "generate-then-approve" else [])
    steps: list[dict[str, Any]] = []
    for step_id in draw(
        st.lists(
            IDENT,
            min_size=1 if kind == "tool-sequence" else 0,
            max_size=0 if kind == "generate" else 4,
            unique=True,
        )
    ):
        args: dict[str, Any] = {}
        for arg in draw(st.lists(IDENT, max_size=3, unique=True)):
            root = draw(st.sampled_from([*roots, *(s["id"] for s in steps), "const"]))
            if root == "const":
                args[arg] = {"const": draw(JSONS)}
            elif root == "input":
                args[arg] = {
                    "from": "input",
                    "path": draw(st.sampled_from(["$", *(f"$.{p}" for p in props)])),
                }
            elif root == "generation":
                args[arg] = {"from": "generation", "path": draw(st.sampled_from(["$", "$.text"]))}
            else:
                args[arg] = {"from": root}
        steps.append({"id": step_id, "tool": draw(st.sampled_from(tool_names)), "args": args})
    execution: dict[str, Any] = {"kind": kind}
    spec: dict[str, Any] = {
        "durability": draw(st.sampled_from(["replayable", "checkpointed"])),
        "input": {"schema": schema},
        "tools": tools,
        "execution": execution,
    }
    if kind == "tool-sequence":
        execution["steps"] = steps
    else:
        spec["model"] = {"provider": "scripted", "name": "m"}
        execution["prompt"] = "Do " + " and ".join(f"{{{{ input.{p} }}}}" for p in props)
        if steps:
            execution["then"] = steps
    wants_approval = kind == "generate-then-approve" or (
        kind == "tool-sequence" and draw(st.booleans())
    )
    if wants_approval:
        on_expiry = draw(st.sampled_from(["fail", "proceed", "escalate"]))
        approval: dict[str, Any] = {
            "required": True,
            "role": draw(IDENT),
            "approvals": draw(st.integers(1, 3)),
            "on_expiry": on_expiry,
        }
        if on_expiry == "proceed":
            approval["allow_unattended"] = draw(st.booleans())
        if on_expiry == "escalate" and draw(st.booleans()):
            approval["escalate_to"] = "supervisor"
        if draw(st.booleans()):
            approval["expires_in"] = {
                draw(st.sampled_from(["minutes", "hours", "days"])): draw(st.integers(1, 30))
            }
        spec["oversight"] = {"approval": approval}
    return {
        "apiVersion": "runplane/v1",
        "kind": "Agent",
        "metadata": {"name": draw(IDENT).replace("_", "-")},
        "spec": spec,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests(), st.data())
def test_every_valid_manifest_compiles_and_runs(doc: dict[str, Any], data: st.DataObject) -> None:
    assert validate_manifest(doc) == []
    spec = compile_manifest(doc)
    assert spec.capability == doc["metadata"]["name"] and spec.digest == manifest_digest(doc)
    props = list(doc["spec"]["input"]["schema"]["properties"])
    tools = {t["name"]: (lambda a, k: {"ok": True, "args": a}) for t in doc["spec"]["tools"]}
    driver = Driver(
        spec, tools=tools, providers={"scripted": ScriptedProvider(["text"])}, approve="APPROVED"
    )
    run = driver.run(spec.capability, {p: data.draw(st.text(max_size=5)) for p in props})
    # Every valid manifest runs to the end (a mutating requires_operator tool still completes:
    # nothing crashes, so nothing is in doubt) and its chain verifies. The end may be the sink
    # gate's: a manifest that sends the model's (untrusted) text, or anything after it, to a
    # mutating tool its deployment did not declare is refused there, journaled at the slot.
    refused = [r for r in run.journal if r.attrs.get("gate") == "refused"]
    if refused:
        assert run.status is RunStatus.FAILED and (run.error or "").startswith("SinkRefused")
        assert refused[-1].attrs["reason"] == "untrusted" and "model" in doc["spec"]
    else:
        assert run.status is RunStatus.COMPLETED, run.error
    assert driver.verify(run.session_id).ok


def _mappings(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every mapping in the document that has a closed set of fields."""
    found: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        # Argument maps, schemas, consts and metadata.labels are open by design.
        if not (
            path[-1:] in (("args",), ("const",), ("schema",), ("properties",))
            or "schema" in path
            or "const" in path
        ):
            found.append(path)
        for key, value in doc.items():
            found.extend(_mappings(value, (*path, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found.extend(_mappings(value, (*path, i)))
    return found


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


Mutation = Callable[[dict[str, Any], st.DataObject], str | None]


def add_unknown_field(doc: dict[str, Any], data: st.DataObject) -> str | None:
    path = data.draw(st.sampled_from(_mappings(doc)))
    _at(doc, path)["zz_unknown"] = 1
    return _dotted((*path, "zz_unknown"))


def unknown_kind(doc: dict[str, Any], data: st.DataObject) -> str | None:
    doc["spec"]["execution"]["kind"] = data.draw(
        st.text(max_size=10).filter(lambda k: k not in KINDS)
    )
    return "spec.execution.kind"


def _all_steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    execution = doc["spec"]["execution"]
    key = "steps" if "steps" in execution else "then"
    return [(f"spec.execution.{key}[{i}]", s) for i, s in enumerate(execution.get(key, []))]


def undeclared_tool(doc: dict[str, Any], data: st.DataObject) -> str | None:
    steps = _all_steps(doc)
    if not steps:
        return None
    where, step = data.draw(st.sampled_from(steps))
    step["tool"] = "never_declared"
    return f"{where}.tool"


def missing_source(doc: dict[str, Any], data: st.DataObject) -> str | None:
    steps = _all_steps(doc)
    if not steps:
        return None
    index = data.draw(st.integers(0, len(steps) - 1))
    where, step = steps[index]
    # Its own id or a later one's is not available (only earlier steps are), nor is a made-up one.
    root = data.draw(st.sampled_from([s["id"] for _, s in steps[index:]] + ["nowhere"]))
    step.setdefault("args", {})["zz"] = {"from": root}
    return f"{where}.args.zz.from"


def undeclared_input_property(doc: dict[str, Any], data: st.DataObject) -> str | None:
    steps = _all_steps(doc)
    if not steps:
        doc["spec"]["execution"]["prompt"] = (
            doc["spec"]["execution"].get("prompt", "") + " {{ input.zz_nope }}"
        )
        return (
            "spec.execution.prompt"
            if "prompt" in doc["spec"]["execution"]
            and doc["spec"]["execution"]["kind"] != "tool-sequence"
            else None
        )
    where, step = data.draw(st.sampled_from(steps))
    step.setdefault("args", {})["zz"] = {"from": "input", "path": "$.zz_nope"}
    return f"{where}.args.zz.path"


def bad_approval(doc: dict[str, Any], data: st.DataObject) -> str | None:
    approval = doc["spec"].get("oversight", {}).get("approval")
    if approval is None:
        return None
    field, value = data.draw(
        st.sampled_from(
            [
                ("on_expiry", "later"),
                ("approvals", 0),
                ("role", ""),
                ("expires_in", {"weeks": 1}),
                ("required", "yes"),
            ]
        )
    )
    approval[field] = value
    return f"spec.oversight.approval.{field}"


def drop_required(doc: dict[str, Any], data: st.DataObject) -> str | None:
    path = data.draw(
        st.sampled_from(
            [
                ("metadata", "name"),
                ("spec", "durability"),
                ("spec", "execution", "kind"),
                ("apiVersion",),
            ]
        )
    )
    del _at(doc, path[:-1])[path[-1]]
    return _dotted(path[:-1])


MUTATIONS: list[Mutation] = [
    add_unknown_field,
    unknown_kind,
    undeclared_tool,
    missing_source,
    undeclared_input_property,
    bad_approval,
    drop_required,
]


@settings(max_examples=300, deadline=None)
@given(manifests(), st.sampled_from(MUTATIONS), st.data())
def test_every_mutation_that_breaks_a_rule_is_refused_where_it_broke(
    doc: dict[str, Any], mutation: Mutation, data: st.DataObject
) -> None:
    broken = copy.deepcopy(doc)
    where = mutation(broken, data)
    if where is None:
        return  # this mutation does not apply to this manifest
    problems = validate_manifest(broken)
    assert problems, f"{mutation.__name__} at {where} was accepted"
    assert any(
        p.path == where or p.path.startswith(where + ".") or p.path.startswith(where + "[")
        for p in problems
    ), (where, problems)
