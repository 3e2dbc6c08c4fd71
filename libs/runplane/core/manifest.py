"""Declarative agents: a YAML manifest naming one behaviour from a closed set (seed 002 §12).

    apiVersion: runplane/v1
    kind: Agent
    metadata: {name: summarise}                 # the capability
    spec:
      durability: replayable                    # replayable | checkpointed
      input: {schema: {...JSON Schema...}}
      model: {provider: openai, name: default, params: {temperature: 0}}
      tools: [{name: publish, mutating: true, recovery: retry}]
      execution:
        kind: generate-then-approve             # generate | tool-sequence | generate-then-approve
        prompt: "Summarise in three sentences:\\n{{ input.text }}"
        then: [{id: publish, tool: publish, args: {text: {from: generation, path: $.text}}}]
      oversight:
        approval: {required: true, role: editor, approvals: 1, expires_in: {hours: 24},
                   on_expiry: fail, allow_unattended: false}

The set of behaviours is closed on purpose: a configuration format whose behaviours are
open-ended is one nobody can review. So there are no expressions anywhere. A tool argument
names its source — ``{from: input|generation|<earlier step id>, path: $.a.b[0]}`` or
``{const: <JSON>}`` — and a prompt interpolates ``{{ input.a.b }}`` placeholders only.

``validate_manifest(doc)`` is pure and lists every problem with its position (unknown kinds,
unknown fields, undeclared tools, sources that do not exist, …); ``compile_manifest(doc)``
returns an ``AgentSpec`` that registers like a coded agent (or raises ``ManifestError`` with
all the problems). The behaviours:

- ``generate``: one model call with the prompt → ``{"text"}``.
- ``generate-then-approve`` (requires ``oversight.approval.required``): the model call, then
  an approval task carrying the actual text; approved → the ``then`` tool steps run (nothing
  durable is written before the decision) → ``{"status": "approved", "text", "decided_by",
  "steps"}``; rejected → ``{"status": "rejected", "text", "comment"}``.
- ``tool-sequence``: the steps in order → ``output`` (sources by name; default every step's
  output by id). With approval required, the task opens before the first mutating step,
  carrying what the earlier steps returned (at the end if no step mutates); rejected →
  ``{"status": "rejected", "comment", "steps"}``.

A mutating step's idempotency key is derived from the run (``<capability>/<session>/<step>``):
the same on every attempt, replay and era. Every model call, tool call and decision is an
ordinary journaled effect, so replay works unchanged.

**The digest** (hex SHA-256 of the manifest's canonical JSON, ``runplane.core.canonical``)
covers the whole agent: it is ``AgentSpec.digest`` and the first journaled effect of every
run (family ``manifest``, the digest in its request witness), so a replay under a changed
manifest is quarantined at call_seq 0 instead of running another agent's history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runplane.core.agents import (
    AgentFn,
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Recovery,
    RetryPolicy,
)
from runplane.core.canonical import canonical_bytes, canonical_json, sha256_hex
from runplane.core.ctx import Decision, Effect, EffectError, Op, StepCtx
from runplane.errors import ConfigError

__all__ = [
    "API_VERSION",
    "KINDS",
    "Manifest",
    "ManifestError",
    "Problem",
    "Source",
    "ToolStep",
    "compile_manifest",
    "load_manifest",
    "load_manifests",
    "manifest_digest",
    "parse_manifest",
    "register_manifests",
    "validate_manifest",
]

API_VERSION: Final = "runplane/v1"
KINDS: Final = ("generate", "generate-then-approve", "tool-sequence")
RESERVED_SOURCES: Final = frozenset({"input", "generation", "const"})
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_STEP_ID = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_DURATION_MS: Final = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
_MODEL_PARAMS: Final = frozenset({"temperature", "max_tokens"})


@dataclass(frozen=True, order=True)
class Problem:
    """One reason a manifest is refused: where (a dotted path into the document) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(document)'}: {self.message}"


class ManifestError(ConfigError):
    """A manifest that does not validate; ``problems`` lists every reason, in document order."""

    def __init__(self, problems: Sequence[Problem], origin: str = "manifest") -> None:
        self.problems = tuple(problems)
        self.origin = origin
        super().__init__(f"{origin}: " + "; ".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Source:
    """Where an argument comes from: ``root`` is ``input``, ``generation``, an earlier step id,
    or ``const`` (then ``value`` is the constant); ``path`` the keys/indexes below it."""

    root: str
    path: tuple[str | int, ...] = ()
    value: Any = None

    def describe(self) -> str:
        return self.root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path)


@dataclass(frozen=True)
class ToolStep:
    id: str
    tool: str
    args: Mapping[str, Source]


@dataclass(frozen=True)
class Approval:
    role: str
    approvals: int = 1
    expires_in_ms: int | None = None
    on_expiry: str = "fail"
    allow_unattended: bool = False
    escalate_to: str | None = None
    question: str | None = None


@dataclass(frozen=True)
class Model:
    provider: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    """A validated manifest (build it with ``parse_manifest``); ``doc`` is the document."""

    name: str
    durability: Durability
    kind: str
    digest: str
    doc: Mapping[str, Any]
    input_schema: Mapping[str, Any] | None = None
    tools: tuple[EffectDecl, ...] = ()
    model: Model | None = None
    prompt: str | None = None
    steps: tuple[ToolStep, ...] = ()
    output: Mapping[str, Source] | None = None
    approval: Approval | None = None

    @property
    def approve_before(self) -> int:
        """For tool-sequence with approval: the index of the step the task opens before."""
        mutating = {d.name for d in self.tools if d.mutating}
        return next((i for i, s in enumerate(self.steps) if s.tool in mutating), len(self.steps))


# ---------------------------------------------------------------------------------------------
# Validation: pure, collects every problem.
# ---------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def fields(
        self, value: Any, path: str, required: Iterable[str], optional: Iterable[str] = ()
    ) -> dict[str, Any] | None:
        """``value`` as a mapping with only the allowed keys (unknown and missing ones reported)."""
        if not isinstance(value, Mapping):
            self.add(path, f"must be a mapping, got {_type(value)}")
            return None
        required, optional = tuple(required), tuple(optional)
        allowed = (*required, *optional)
        for key in value:
            if key not in allowed:
                self.add(
                    _join(path, str(key)),
                    f"unknown field {str(key)!r} (expected one of: {', '.join(allowed)})",
                )
        for key in required:
            if key not in value:
                self.add(path, f"missing required field {key!r}")
        return {str(k): v for k, v in value.items() if k in allowed}

    def string(
        self, value: Any, path: str, pattern: re.Pattern[str] | None = None, what: str = ""
    ) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.add(path, f"must be a non-empty string, got {_type(value)}")
            return None
        if pattern is not None and not pattern.match(value):
            self.add(path, f"{value!r} is not a valid {what} (must match {pattern.pattern})")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.add(path, f"must be true or false, got {_type(value)}")
            return None
        return value

    def integer(self, value: Any, path: str, minimum: int) -> int | None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.add(path, f"must be an integer >= {minimum}, got {value!r}")
            return None
        return value

    def choice(self, value: Any, path: str, choices: Sequence[str]) -> str | None:
        if value not in choices:
            self.add(path, f"must be one of {', '.join(choices)}, got {value!r}")
            return None
        return str(value)


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _join(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


def parse_path(text: Any) -> tuple[str | int, ...] | None:
    """``$``, ``$.a.b``, ``$.items[0].id`` → the parts; None when it is not such a path."""
    if not isinstance(text, str) or not text.startswith("$"):
        return None
    parts: list[str | int] = []
    pos = 1
    while pos < len(text):
        match = _PATH_PART.match(text, pos)
        if match is None:
            return None
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    return tuple(parts)


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
    c = _Checker()
    try:
        digest = manifest_digest(doc)
    except (TypeError, ValueError) as exc:
        # YAML can decode dates, sets and NaN: none of them has a canonical JSON form.
        return None, [Problem("", f"is not a JSON document: {exc}")]
    top = c.fields(doc, "", ("apiVersion", "kind", "metadata", "spec"))
    if top is None:
        return None, c.problems
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
        c.string(meta.get("name"), "metadata.name", _NAME, "capability name")
        if meta and "name" in meta
        else None
    )
    if meta and "description" in meta and not isinstance(meta["description"], str):
        c.add("metadata.description", f"must be a string, got {_type(meta['description'])}")
    if (
        meta
        and "labels" in meta
        and not (
            isinstance(meta["labels"], Mapping)
            and all(isinstance(v, str) for v in meta["labels"].values())
        )
    ):
        c.add("metadata.labels", "must be a mapping of strings")
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
    input_schema = _input_schema(c, spec.get("input"))
    tools = _tools(c, spec.get("tools", []))
    approval = _approval(c, spec.get("oversight"))
    execution = (
        c.fields(
            spec["execution"], "spec.execution", ("kind",), ("prompt", "then", "steps", "output")
        )
        if "execution" in spec
        else None
    )
    kind = None
    model = None
    prompt = None
    steps: tuple[ToolStep, ...] = ()
    output = None
    step_ids: list[str] = []
    if execution is not None and "kind" in execution:
        kind = c.choice(execution["kind"], "spec.execution.kind", KINDS)
    if kind is not None and execution is not None:
        allowed = {
            "generate": {"kind", "prompt"},
            "generate-then-approve": {"kind", "prompt", "then"},
            "tool-sequence": {"kind", "steps", "output"},
        }[kind]
        for key in execution:
            if key not in allowed:
                c.add(
                    f"spec.execution.{key}",
                    f"not a field of kind {kind!r} (allowed: {', '.join(sorted(allowed))})",
                )
        tool_names = {d.name for d in tools}
        if kind in ("generate", "generate-then-approve"):
            model = _model(c, spec.get("model"))
            prompt = _template(c, execution.get("prompt"), "spec.execution.prompt", input_schema)
            steps = _steps(
                c,
                execution.get("then", []),
                "spec.execution.then",
                tool_names,
                ("input", "generation"),
                input_schema,
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
        else:
            if "model" in spec:
                c.add("spec.model", "kind 'tool-sequence' makes no model call: remove the model")
            if "steps" not in execution:
                c.add("spec.execution", "missing required field 'steps' for kind 'tool-sequence'")
            else:
                steps = _steps(
                    c,
                    execution["steps"],
                    "spec.execution.steps",
                    tool_names,
                    ("input",),
                    input_schema,
                    step_ids,
                )
                if not steps and isinstance(execution["steps"], list) and not execution["steps"]:
                    c.add("spec.execution.steps", "needs at least one step")
            output = _output(c, execution.get("output"), set(step_ids), input_schema)
    if c.problems or name is None or durability is None or kind is None:
        return None, c.problems
    manifest = Manifest(
        name=name,
        durability=Durability(durability),
        kind=kind,
        digest=digest,
        doc=doc,
        input_schema=input_schema,
        tools=tools,
        model=model,
        prompt=prompt,
        steps=steps,
        output=output,
        approval=approval,
    )
    return manifest, []


def _approval_problems(c: _Checker) -> bool:
    """Whether the approval section already has a problem reported (do not pile on)."""
    return any(p.path.startswith("spec.oversight") for p in c.problems)


def _input_schema(c: _Checker, value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    section = c.fields(value, "spec.input", ("schema",))
    if section is None or "schema" not in section:
        return None
    schema = section["schema"]
    if not isinstance(schema, Mapping):
        c.add("spec.input.schema", f"must be a JSON Schema object, got {_type(schema)}")
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


def _tools(c: _Checker, value: Any) -> tuple[EffectDecl, ...]:
    if not isinstance(value, list):
        c.add("spec.tools", f"must be a list, got {_type(value)}")
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


def _duration_ms(c: _Checker, value: Any, path: str) -> int | None:
    if isinstance(value, Mapping) and any(unit not in _DURATION_MS for unit in value):
        for unit in value:
            if unit not in _DURATION_MS:
                c.add(
                    _join(path, str(unit)),
                    f"unknown unit {str(unit)!r} (expected one of: {', '.join(_DURATION_MS)})",
                )
        return None
    if isinstance(value, Mapping) and len(value) == 1:
        ((unit, n),) = value.items()
        if unit in _DURATION_MS and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n * _DURATION_MS[unit]
    c.add(path, f"must be one of {{minutes|hours|days: n > 0}}, got {value!r}")
    return None


def _approval(c: _Checker, value: Any) -> Approval | None:
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
    question = _template(c, a["question"], f"{path}.question", None) if "question" in a else None
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
    return Approval(role, approvals, expires, on_expiry, unattended, escalate_to, question)


def _model(c: _Checker, value: Any) -> Model | None:
    if value is None:
        c.add("spec", "missing required field 'model' (this kind makes a model call)")
        return None
    m = c.fields(value, "spec.model", ("provider", "name"), ("params",))
    if m is None:
        return None
    provider = c.string(m.get("provider"), "spec.model.provider") if "provider" in m else None
    name = c.string(m.get("name"), "spec.model.name") if "name" in m else None
    params = c.fields(m.get("params", {}), "spec.model.params", (), sorted(_MODEL_PARAMS))
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


def _check_input_path(
    c: _Checker, path: str, parts: tuple[str | int, ...], schema: Mapping[str, Any] | None
) -> None:
    """A path into the input names a declared property when the schema closes the object."""
    if not parts or schema is None or schema.get("additionalProperties") is not False:
        return
    props = schema.get("properties")
    if isinstance(props, Mapping) and parts[0] not in props:
        c.add(
            path,
            f"input has no property {parts[0]!r} (declared: {', '.join(sorted(props)) or 'none'})",
        )


def _template(c: _Checker, value: Any, path: str, schema: Mapping[str, Any] | None) -> str | None:
    text = c.string(value, path)
    if text is None:
        return None
    for match in _PLACEHOLDER.finditer(text):
        expr = match.group(1)
        parts = (
            parse_path("$" + expr[len("input") :])
            if expr == "input" or expr.startswith(("input.", "input["))
            else None
        )
        if parts is None:
            c.add(
                path,
                f"placeholder {match.group(0)!r}: only {{{{ input }}}} and {{{{ input.a.b[0] }}}} are allowed",
            )
        else:
            _check_input_path(c, path, parts, schema)
    if "{{" in _PLACEHOLDER.sub("", text) or "}}" in _PLACEHOLDER.sub("", text):
        c.add(path, "unbalanced '{{' or '}}'")
    return text


def _source(
    c: _Checker, value: Any, path: str, known: Sequence[str], schema: Mapping[str, Any] | None
) -> Source | None:
    if isinstance(value, Mapping) and "const" in value:
        if len(value) != 1:
            for key in value:
                if key != "const":
                    c.add(
                        _join(path, str(key)),
                        f"unknown field {str(key)!r} beside const (a constant is {{const: value}} alone)",
                    )
            return None
        return Source("const", (), value["const"])
    s = c.fields(value, path, ("from",), ("path",))
    if s is None or "from" not in s:
        return None
    root = s["from"]
    if root not in known:
        later = "" if not isinstance(root, str) else f" (sources here: {', '.join(known)})"
        c.add(f"{path}.from", f"{root!r} is not a source available here{later}")
        return None
    parts = parse_path(s.get("path", "$"))
    if parts is None:
        c.add(f"{path}.path", f"{s.get('path')!r} is not a path like $ or $.a.b[0]")
        return None
    if root == "input":
        _check_input_path(c, f"{path}.path", parts, schema)
    if root == "generation" and parts and parts[0] != "text":
        c.add(f"{path}.path", "the generation has one field: $.text")
        return None
    return Source(str(root), parts)


def _steps(
    c: _Checker,
    value: Any,
    path: str,
    tools: set[str],
    roots: tuple[str, ...],
    schema: Mapping[str, Any] | None,
    ids: list[str],
) -> tuple[ToolStep, ...]:
    if not isinstance(value, list):
        c.add(path, f"must be a list, got {_type(value)}")
        return ()
    steps: list[ToolStep] = []
    known = list(roots)
    for i, item in enumerate(value):
        at = f"{path}[{i}]"
        s = c.fields(item, at, ("id", "tool"), ("args",))
        if s is None:
            continue
        step_id = c.string(s.get("id"), f"{at}.id", _STEP_ID, "step id") if "id" in s else None
        if step_id is not None and (step_id in RESERVED_SOURCES or step_id in known):
            c.add(
                f"{at}.id",
                f"{step_id!r} is {'reserved' if step_id in RESERVED_SOURCES else 'already used by an earlier step'}",
            )
            step_id = None
        tool = c.string(s.get("tool"), f"{at}.tool") if "tool" in s else None
        if tool is not None and tool not in tools:
            c.add(
                f"{at}.tool",
                f"tool {tool!r} is not declared in spec.tools (declared: {', '.join(sorted(tools)) or 'none'})",
            )
            tool = None
        args: dict[str, Source] = {}
        raw_args = s.get("args", {})
        if not isinstance(raw_args, Mapping):
            c.add(
                f"{at}.args", f"must be a mapping of argument name to source, got {_type(raw_args)}"
            )
        else:
            for arg, src in raw_args.items():
                parsed = _source(c, src, f"{at}.args.{arg}", known, schema)
                if parsed is not None:
                    args[str(arg)] = parsed
        if step_id is not None:
            known.append(step_id)  # later steps may use this one's output, never earlier ones
            if tool is not None:
                steps.append(ToolStep(step_id, tool, args))
    # A step refused for its tool still names a source (no second, cascading refusal).
    ids.extend(known[len(roots) :])
    return tuple(steps)


def _output(
    c: _Checker, value: Any, steps: set[str], schema: Mapping[str, Any] | None
) -> Mapping[str, Source] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        c.add(
            "spec.execution.output",
            f"must be a non-empty mapping of name to source, got {_type(value)}",
        )
        return None
    known = ["input", *sorted(steps)]
    out: dict[str, Source] = {}
    for key, src in value.items():
        parsed = _source(c, src, f"spec.execution.output.{key}", known, schema)
        if parsed is not None:
            out[str(key)] = parsed
    return out


# ---------------------------------------------------------------------------------------------
# Compilation: the runtime behaviours. Everything goes through StepCtx, so it is journaled.
# ---------------------------------------------------------------------------------------------


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


async def _approve(ctx: StepCtx, m: Manifest, input: Any, answer: Any) -> Decision:
    a = m.approval
    assert a is not None
    question = render(a.question, input) if a.question else f"Approve the answer of {m.name}?"
    decision: Decision = await ctx.approval(
        question,
        answer,
        role=a.role,
        approvals=a.approvals,
        expires_in=a.expires_in_ms,
        on_expiry=a.on_expiry,
        allow_unattended=a.allow_unattended,
        escalate_to=a.escalate_to,
    )
    return decision


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


def _done(m: Manifest, scope: Mapping[str, Any]) -> dict[str, Any]:
    return {s.id: scope[s.id] for s in m.steps if s.id in scope}


async def _call(ctx: StepCtx, m: Manifest, step: ToolStep, scope: Mapping[str, Any]) -> Any:
    args = {name: resolve(src, scope, f"{step.id}.args.{name}") for name, src in step.args.items()}
    decl = next(d for d in m.tools if d.name == step.tool)
    # Derived from the run: every attempt, replay and era presents the same key to the peer.
    key = f"{m.name}/{ctx.session_id}/{step.id}" if decl.mutating else None
    return await ctx.tool(step.tool, args, idempotency_key=key)


def resolve(source: Source, scope: Mapping[str, Any], where: str = "argument") -> Any:
    """The value a source names in ``scope`` (input, generation, step outputs by id);
    ``EffectError("SourceMissing")`` when the value does not have that path (the run fails
    with the position, never with a KeyError from inside the runtime)."""
    if source.root == "const":
        return source.value
    value = scope[source.root]
    for part in source.path:
        if isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):  # noqa: SIM114  (two branches: mypy narrows each index type)
            value = value[part]
        elif isinstance(part, str) and isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
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

    return _PLACEHOLDER.sub(fill, template)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def load_manifest(path: str | Path) -> AgentSpec:
    """Read and compile one YAML manifest; ``ManifestError`` names the file and every problem."""
    import yaml  # at load time only: the core does not need YAML to run coded agents

    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ManifestError([Problem("", f"not YAML: {exc}")], str(file)) from None
    return compile_manifest(doc, str(file))


def load_manifests(directory: str | Path) -> list[AgentSpec]:
    """Compile every ``*.yaml``/``*.yml`` manifest in ``directory`` (sorted by name)."""
    folder = Path(directory)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return [load_manifest(p) for p in files]


def register_manifests(directory: str | Path, registry: AgentRegistry) -> list[AgentSpec]:
    """Compile and register every manifest in ``directory`` into ``registry``."""
    return [registry.register(spec) for spec in load_manifests(directory)]


# ---------------------------------------------------------------------------------------------
# `runplane lint` over YAML
# ---------------------------------------------------------------------------------------------

LINT_CODE: Final = "RPL100"
_PROBLEM_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def is_manifest_file(path: str | Path) -> bool:
    """A YAML file that declares ``apiVersion: runplane/…`` (what ``runplane lint DIR`` checks;
    other YAML beside the agents — calendars, principals — is not a manifest)."""
    file = Path(path)
    if file.suffix not in (".yaml", ".yml"):
        return False
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"^apiVersion:\s*['\"]?runplane/", text, re.MULTILINE) is not None


def lint_manifest(path: str | Path) -> list[Any]:
    """``runplane lint`` findings (``runplane.core.lint.Finding``, code RPL100) for one YAML
    manifest: each validation problem at the line of the field it names."""
    import yaml

    from runplane.core.lint import Finding  # lint is imported by agents, which this imports

    file = Path(path)
    alternative = "see docs/contracts.md, 'Effect groups and declarative agents'"
    try:
        text = file.read_text(encoding="utf-8")
        root = yaml.compose(text)
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return [Finding(str(file), line, col, LINT_CODE, f"not YAML: {exc.problem}", alternative)]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return [Finding(str(file), 1, 1, LINT_CODE, f"cannot read: {exc}", alternative)]
    findings = []
    for problem in validate_manifest(doc):
        line, col = _problem_position(root, problem.path)
        findings.append(Finding(str(file), line, col, LINT_CODE, str(problem), alternative))
    return sorted(findings)


def _problem_position(root: Any, path: str) -> tuple[int, int]:
    """Line and column (1-based) of the deepest node of the document along ``path``: the key
    of a mapping entry, the item of a list."""
    import yaml

    node = root
    if node is None:
        return (1, 1)
    where = node.start_mark
    for match in _PROBLEM_PART.finditer(path):
        key, index = match.group(1), match.group(2)
        if isinstance(node, yaml.MappingNode) and key is not None:
            entry = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, yaml.ScalarNode) and k.value == key
                ),
                None,
            )
            if entry is None:
                break
            where, node = entry[0].start_mark, entry[1]
        elif (
            isinstance(node, yaml.SequenceNode)
            and index is not None
            and int(index) < len(node.value)
        ):
            node = node.value[int(index)]
            where = node.start_mark
        else:
            break
    return (where.line + 1, where.column + 1)
