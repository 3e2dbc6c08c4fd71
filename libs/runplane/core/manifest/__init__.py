"""Declarative agents: a YAML manifest naming one behaviour from a closed set.

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

- ``agent-loop``: the model chooses among the declared tools it is offered
  (``execution.tools``) under ``instructions`` (a template over the input) until it answers
  or its ``budget`` ends it (``turns`` required; ``tool_calls``, ``tokens``): ``ctx.agent_loop``
  → ``{"status": "answered" | "budget_exhausted", "text", "turns", "calls", "refused",
  "exhausted"?}``. No approval of its answer: a tool that needs a person is marked so.
  ``mode: planned`` (no budget): the model writes the plan over those tools first, from the
  instructions and the input alone, and the plan runs (``ctx.planned_loop``) →
  ``{"status": "completed" | "plan_refused" | "node_failed", "plan", "nodes", "refused",
  "output", "problems"?, "failed"?}``.

An approval with ``expires_in`` in a run that has a case first registers its obligation on
the case (``approval:<capability>:<session>``, due ``expires_in`` on ``calendar``, default
``wall``); the task expires when the obligation is due, and a person's decision meets it (an
unattended ``proceed`` or an expiry leaves it to breach, with the case's follow-up). Runs
recorded before this rule replay as they were (the ``declarative-approval-obligation`` patch).

A mutating step's idempotency key is derived from the run (``<capability>/<session>/<step>``):
the same on every attempt, replay and era. Every model call, tool call and decision is an
ordinary journaled effect, so replay works unchanged.

**The digest** (hex SHA-256 of the manifest's canonical JSON, ``runplane.core.canonical``)
covers the whole agent: it is ``AgentSpec.digest`` and the first journaled effect of every
run (family ``manifest``, the digest in its request witness), so a replay under a changed
manifest is quarantined at call_seq 0 instead of running another agent's history.

The package: ``_model`` (the values, ``ManifestError``, the problem checker), ``_parse``
(the document and its ``execution``), ``_sections`` (input schema, tools, model, approval),
``_sources`` (argument sources, steps, outputs, templates), ``_compile`` (the agent function
and its behaviours), ``_files`` (loading, registering, ``runplane lint``).
"""

from __future__ import annotations

from runplane.core.manifest._compile import compile_manifest, render, resolve
from runplane.core.manifest._files import (
    LINT_CODE,
    is_manifest_file,
    lint_manifest,
    lint_paths,
    load_manifest,
    load_manifests,
    register_manifests,
)
from runplane.core.manifest._model import (
    API_VERSION,
    KINDS,
    Approval,
    Manifest,
    ManifestError,
    Model,
    Problem,
    Source,
    ToolStep,
)
from runplane.core.manifest._parse import manifest_digest, parse_manifest, validate_manifest

__all__ = [
    "API_VERSION",
    "KINDS",
    "LINT_CODE",
    "Approval",
    "Manifest",
    "ManifestError",
    "Model",
    "Problem",
    "Source",
    "ToolStep",
    "compile_manifest",
    "is_manifest_file",
    "lint_manifest",
    "lint_paths",
    "load_manifest",
    "load_manifests",
    "manifest_digest",
    "parse_manifest",
    "register_manifests",
    "render",
    "resolve",
    "validate_manifest",
]
