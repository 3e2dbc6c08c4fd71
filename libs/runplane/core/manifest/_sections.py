"""The sections of ``spec`` that declare things: the input schema, the tools, the model and
the approval. Pure; every problem goes to the :class:`Checker`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.core.agents import EffectDecl, Recovery, RetryPolicy
from runplane.core.manifest._model import (
    DURATION_MS,
    MODEL_PARAMS,
    Approval,
    Checker,
    Model,
    join_path,
    type_name,
)
from runplane.core.manifest._sources import template


def input_section(c: Checker, value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    section = c.fields(value, "spec.input", ("schema",))
    if section is None or "schema" not in section:
        return None
    schema = section["schema"]
    if not isinstance(schema, Mapping):
        c.add("spec.input.schema", f"must be a JSON Schema object, got {type_name(schema)}")
        return None
    import jsonschema  # at validation time only, like AgentSpec.input_problem

    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        c.add(
            "spec.input.schema" + (f" ({where})" if where else ""),
            f"is not a valid JSON Schema: {exc.message}",
        )
        return None
    return schema


def tools_section(c: Checker, value: Any) -> tuple[EffectDecl, ...]:
    if not isinstance(value, list):
        c.add("spec.tools", f"must be a list, got {type_name(value)}")
        return ()
    decls: list[EffectDecl] = []
    probes: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        path = f"spec.tools[{i}]"
        t = c.fields(
            item, path, ("name", "mutating"), ("recovery", "probe", "timeout_s", "max_attempts")
        )
        if t is None:
            continue
        # mutating is required: a tool that forgets to describe itself would otherwise get a
        # default nobody reviewed (the engine's is the conservative one, but say it here).
        name = c.string(t.get("name"), f"{path}.name") if "name" in t else None
        mutating = c.boolean(t.get("mutating"), f"{path}.mutating") if "mutating" in t else None
        recovery = (
            c.choice(t["recovery"], f"{path}.recovery", [r.value for r in Recovery])
            if "recovery" in t
            else None
        )
        probe = c.string(t["probe"], f"{path}.probe") if "probe" in t else None
        timeout = t.get("timeout_s", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            c.add(f"{path}.timeout_s", f"must be a number > 0, got {timeout!r}")
            timeout = None
        attempts = (
            c.integer(t["max_attempts"], f"{path}.max_attempts", 1) if "max_attempts" in t else 3
        )
        if (
            name is None
            or mutating is None
            or timeout is None
            or attempts is None
            or (("recovery" in t) and recovery is None)
        ):
            continue
        if name in {d.name for d in decls}:
            c.add(f"{path}.name", f"tool {name!r} is declared twice")
            continue
        try:
            decl = EffectDecl(
                name,
                mutating=mutating,
                recovery=None if recovery is None else Recovery(recovery),
                retry=RetryPolicy(max_attempts=attempts),
                timeout_s=float(timeout),
                probe=probe,
            )
        except ValueError as exc:
            c.add(path, str(exc))
            continue
        decls.append(decl)
        if probe is not None:
            probes.append((f"{path}.probe", probe))
    by_name = {d.name: d for d in decls}
    for path, probe in probes:
        target = by_name.get(probe)
        if target is None:
            c.add(
                path,
                f"probe {probe!r} is not a declared tool (declared: {', '.join(sorted(by_name)) or 'none'})",
            )
        elif target.mutating:
            c.add(path, f"probe {probe!r} must be declared mutating: false (it only asks)")
    return tuple(decls)


def _duration_ms(c: Checker, value: Any, path: str) -> int | None:
    if isinstance(value, Mapping) and any(unit not in DURATION_MS for unit in value):
        for unit in value:
            if unit not in DURATION_MS:
                c.add(
                    join_path(path, str(unit)),
                    f"unknown unit {str(unit)!r} (expected one of: {', '.join(DURATION_MS)})",
                )
        return None
    if isinstance(value, Mapping) and len(value) == 1:
        ((unit, n),) = value.items()
        if unit in DURATION_MS and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n * DURATION_MS[unit]
    c.add(path, f"must be one of {{minutes|hours|days: n > 0}}, got {value!r}")
    return None


def approval_section(c: Checker, value: Any) -> Approval | None:
    """The declared approval when required; None when absent or ``required: false``."""
    if value is None:
        return None
    oversight = c.fields(value, "spec.oversight", ("approval",))
    if oversight is None or "approval" not in oversight:
        return None
    path = "spec.oversight.approval"
    a = c.fields(
        oversight["approval"],
        path,
        ("required",),
        (
            "role",
            "approvals",
            "expires_in",
            "on_expiry",
            "allow_unattended",
            "escalate_to",
            "question",
            "calendar",
        ),
    )
    if a is None or "required" not in a:
        return None
    required = c.boolean(a["required"], f"{path}.required")
    if not required:
        extra = sorted(set(a) - {"required"})
        if required is False and extra:
            c.add(path, f"required is false: remove {', '.join(extra)} (they would never apply)")
        return None
    role = c.string(a.get("role"), f"{path}.role") if "role" in a else None
    if "role" not in a:
        c.add(path, "missing required field 'role' (who decides)")
    approvals = c.integer(a.get("approvals", 1), f"{path}.approvals", 1)
    expires = (
        _duration_ms(c, a["expires_in"], f"{path}.expires_in")
        if a.get("expires_in") is not None
        else None
    )
    on_expiry = c.choice(
        a.get("on_expiry", "fail"), f"{path}.on_expiry", ("fail", "proceed", "escalate")
    )
    unattended = c.boolean(a.get("allow_unattended", False), f"{path}.allow_unattended")
    escalate_to = (
        c.string(a["escalate_to"], f"{path}.escalate_to")
        if a.get("escalate_to") is not None
        else None
    )
    question = template(c, a["question"], f"{path}.question", None) if "question" in a else None
    calendar = c.string(a.get("calendar", "wall"), f"{path}.calendar")
    if "calendar" in a and a.get("expires_in") is None:
        c.add(f"{path}.calendar", "only applies with expires_in (the obligation it is due on)")
    if on_expiry in ("fail", "proceed") and escalate_to is not None:
        c.add(
            f"{path}.escalate_to",
            f"only applies with on_expiry: escalate (on_expiry is {on_expiry})",
        )
    if unattended and on_expiry != "proceed":
        c.add(
            f"{path}.allow_unattended",
            "only applies with on_expiry: proceed (both opt-ins are needed)",
        )
    if role is None or approvals is None or on_expiry is None or unattended is None:
        return None
    return Approval(
        role,
        approvals,
        expires,
        on_expiry,
        unattended,
        escalate_to,
        question,
        expires_rule=dict(a["expires_in"]) if expires is not None else None,
        calendar=calendar or "wall",
    )


def model_section(c: Checker, value: Any) -> Model | None:
    if value is None:
        c.add("spec", "missing required field 'model' (this kind makes a model call)")
        return None
    m = c.fields(value, "spec.model", ("provider", "name"), ("params",))
    if m is None:
        return None
    provider = c.string(m.get("provider"), "spec.model.provider") if "provider" in m else None
    name = c.string(m.get("name"), "spec.model.name") if "name" in m else None
    params = c.fields(m.get("params", {}), "spec.model.params", (), sorted(MODEL_PARAMS))
    if params is not None:
        if "temperature" in params and (
            isinstance(params["temperature"], bool)
            or not isinstance(params["temperature"], (int, float))
            or not 0 <= params["temperature"] <= 2
        ):
            c.add(
                "spec.model.params.temperature",
                f"must be a number in [0, 2], got {params['temperature']!r}",
            )
        if "max_tokens" in params:
            c.integer(params["max_tokens"], "spec.model.params.max_tokens", 1)
    if provider is None or name is None:
        return None
    return Model(provider, name, dict(params or {}))
