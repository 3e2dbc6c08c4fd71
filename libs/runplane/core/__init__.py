"""The durable core: agents, StepCtx, the journal chain and the replay engine. Pure, no I/O.

    from runplane.core import agent, StepCtx, Runtime, Outcome, verify_chain

- ``agents``: ``@agent`` / ``AgentRegistry`` / ``AgentSpec``, effect declarations
  (``EffectDecl``, ``Recovery``, ``RetryPolicy``), ``Durability`` and the eviction rule
  ``evictable``, the provider/tool interfaces (``ModelProvider``, ``Tool``, ``Generation``).
- ``ctx``: ``StepCtx`` (what an agent calls), the values it returns (``Decision``,
  ``CaseState``) and the errors an agent may catch (``EffectError``, ``CaseConflict``,
  ``CaseRefused``, ``ApprovalExpired``); rule helpers ``minutes/hours/days/working_days``.
- ``engine`` (a package, one module per responsibility; see its docstring): ``Runtime`` (one
  run; ``start`` / ``restore`` / ``deliver`` / ``complete`` return a ``Step``), ``LiveCall``,
  ``Outcome``, ``replay_history``, and the failure steps for runs it cannot serve.
- ``chain``: ``seal``, ``Draft``, ``run_admitted``, ``record_hash``, ``request_witness``,
  ``body_digest``; ``verify``: the one chain verifier, ``verify_chain`` → ``ChainCheck`` (and
  the per-record fold ``verify_records`` the journal service and the CLI read).
- ``canonical``: the canonical JSON that every hash is computed over.
- ``determinism``: ``session_seed``, ``derive_random``, ``derive_randint``.
- ``labels``: the label join (``join``, ``join_all``, ``BOTTOM``) and ``at_source``, the label
  each effect gives its result, ``Labeled`` (import from ``runplane.core.labels``); the sink
  gate ``runplane.core.gate`` (``@sinks``, ``SinkDecl``, ``FieldRule``), ``runplane.core.releases``
  (``Released``, ``SinkRefused``, ``BudgetExceeded``, ``ReleaseRefused``) and
  ``runplane.core.policy`` (deployment policy, budgets) — docs/security.md, "The label model".
- ``lint``: the determinism lint behind ``runplane lint`` and ``@agent``.
- ``plan``: plans as frozen authorization graphs (IR, contract, source binding, delegation,
  quorum and batch outcomes); ``planrun``: ``ctx.run_plan`` / ``fan_out`` / ``parallel`` /
  ``commission`` / ``panel`` built on ``StepCtx``.

The executor drives it (see docs/contracts.md, "The durable core").
"""

from __future__ import annotations

from runplane.core.agents import (
    REGISTRY,
    AgentFn,
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Generation,
    ModelProvider,
    Recovery,
    RetryPolicy,
    Tool,
    UnknownCapability,
    agent,
    evictable,
)
from runplane.core.canonical import canonical_bytes, canonical_json
from runplane.core.chain import (
    ChainCheck,
    ChainFault,
    Draft,
    body_digest,
    default_label,
    entry_body_digest,
    record_hash,
    request_witness,
    run_admitted,
    seal,
)
from runplane.core.ctx import StepCtx
from runplane.core.determinism import derive_randint, derive_random, session_seed
from runplane.core.effect import (
    ApprovalExpired,
    CaseConflict,
    CaseRefused,
    CaseState,
    Decision,
    Effect,
    EffectError,
    days,
    hours,
    minutes,
    working_days,
)
from runplane.core.engine import (
    Command,
    Event,
    InFlight,
    LiveCall,
    OpenRequest,
    Outcome,
    ReplayReport,
    Runtime,
    Step,
    replay_history,
)
from runplane.core.lint import Finding, LintFailed, lint_function, lint_source
from runplane.core.manifest import lint_paths
from runplane.core.verify import verify_chain

__all__ = [
    "REGISTRY",
    "AgentFn",
    "AgentRegistry",
    "AgentSpec",
    "ApprovalExpired",
    "CaseConflict",
    "CaseRefused",
    "CaseState",
    "ChainCheck",
    "ChainFault",
    "Command",
    "Decision",
    "Draft",
    "Durability",
    "Effect",
    "EffectDecl",
    "EffectError",
    "Event",
    "Finding",
    "Generation",
    "InFlight",
    "LintFailed",
    "LiveCall",
    "ModelProvider",
    "OpenRequest",
    "Outcome",
    "Recovery",
    "ReplayReport",
    "RetryPolicy",
    "Runtime",
    "Step",
    "StepCtx",
    "Tool",
    "UnknownCapability",
    "agent",
    "body_digest",
    "canonical_bytes",
    "canonical_json",
    "days",
    "default_label",
    "derive_randint",
    "derive_random",
    "entry_body_digest",
    "evictable",
    "hours",
    "lint_function",
    "lint_paths",
    "lint_source",
    "minutes",
    "record_hash",
    "replay_history",
    "request_witness",
    "run_admitted",
    "seal",
    "session_seed",
    "verify_chain",
    "working_days",
]
