"""Deployment policy: sink declarations, what each agent is granted, and per-run budgets. Pure.

A small YAML document the executor loads once (``RUNPLANE_POLICY``; parsing here, the file is
read by the service). Its ``digest`` (SHA-256 of the canonical JSON of the parsed document, so
comments and key order do not change it) is journaled with every gate decision.

    sources:                              # what a source returns, whatever its code declares
      "tool://crm_lookup": {trust: trusted, sensitivity: confidential}
      "tool://read_inbox": {trust: untrusted}
    sinks:                                # the deployment's sink declarations (gate.SinkDecl)
      "model:openai/gpt-4o-mini": {mutating: false, ceiling: internal}
      "tool://payout":
        protected:
          - {path: $.recipient, sources: [tool://crm_lookup]}
          - {path: $.amount_cents}
        approval: {role: finance, approvals: 1}   # a person approves each call first
      "tool://send_mail": {approval: {role: support}}  # approval only: judged as before
    agents:
      payout:
        sinks: [tool://payout, tool://crm_lookup]   # the only sinks it may reach (absent: any)
        release:                                    # data:release, granted without asking
          - {destination: tool://payout, fields: [$.memo], trust: true}
        release_role: finance                       # who decides a release policy does not grant
        input: {trust: untrusted}                   # the label of the admission input
        trusted_signals:                            # signals labelled trusted (else untrusted)
          - {name: approve, sender: alice}          # this signal from this principal
          - {sender: ops-bot}                       # any signal from this principal
        budget: {tool_calls: 20, model_tokens: 20000, cost_units: 5, wall_ms: 86400000}
        unattributed: context                       # the default; ``agent`` is WEAKER (below)
    queues:                               # capabilities whose runs wait their turn (core.queues)
      payout: {concurrency: 5, per_tenant: 2, rate_per_s: 10, burst: 10}

``unattributed`` says how the gate labels bytes that match no recorded output: ``context``
(the default) gives them the run's context label once it has read anything untrusted, so
re-chunked untrusted text stays untrusted; ``agent`` is the rule before it — such bytes are
the agent's own, trusted, whatever the run has read — and is weaker (docs/security.md).

Without a document the default policy holds (``Policy()``): the gate judges every outbound
call of every run all the same — a sink's declaration is the deployment's, else the agent's
``@sinks``, else the call's own ``mutating`` with no egress ceiling (``sink_decl``), so a
mutating sink refuses untrusted arguments whether or not anyone declared it.

A sink's ``approval`` (an ``ApprovalRule``: who, how many) says a person approves, rejects or
edits every call an agent loop proposes to it before it is made (``ctx.approve_call``; the loop
asks ``core.callapproval.needs_approval``). An entry that says nothing but ``approval`` declares
no sink: the call is judged as it would be without the entry.

Budget arithmetic is above the replay line: ``Spent`` is a fold over the run's result journal,
and a refusal is journaled at the slot of the call it refused, so a replay serves the refusal
and never recomputes it against a different policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

import yaml

from runplane.core.canonical import canonical_bytes, sha256_hex
from runplane.core.gate import FieldRule, SinkDecl
from runplane.core.queues import QueueLimits
from runplane.errors import ConfigError, TerminalError
from runplane.wire import Label, ResultEntry, Sensitivity, Trust

__all__ = [
    "DEFAULT_APPROVAL_ROLE",
    "GATE_ERRORS",
    "UNATTRIBUTED_RULES",
    "AgentPolicy",
    "ApprovalRule",
    "Budget",
    "Policy",
    "ReleaseGrant",
    "SignalTrust",
    "Spent",
    "parse_policy",
    "sink_decl",
]

# The failure types the gate records; a refused call was never performed, so it spends nothing.
GATE_ERRORS: Final = frozenset({"SinkRefused", "BudgetExceeded", "DelegationRefused"})
# How the gate labels bytes that match nothing: by the run's context (the default), or as the
# agent's own (the weaker rule a deployment may name, agent by agent).
UNATTRIBUTED_RULES: Final = ("context", "agent")
# Who approves a call that only its tool's declaration marks as needing approval.
DEFAULT_APPROVAL_ROLE: Final = "approver"


@dataclass(frozen=True)
class ApprovalRule:
    """A person with ``role`` approves each proposed call to a sink (``approvals`` distinct
    principals, never the run's initiator) before it is made; ``expires_in``: ms the task stays
    open (None: until decided)."""

    role: str = DEFAULT_APPROVAL_ROLE
    approvals: int = 1
    expires_in: int | None = None

    def __post_init__(self) -> None:
        if not self.role.strip():
            raise ConfigError("policy: an approval names a role")
        if self.approvals < 1:
            raise ConfigError(f"policy: approval needs approvals >= 1, got {self.approvals}")
        if self.expires_in is not None and self.expires_in <= 0:
            raise ConfigError(f"policy: approval expires_in must be > 0 ms, got {self.expires_in}")


@dataclass(frozen=True)
class Budget:
    """Per-run limits; None: unlimited."""

    tool_calls: int | None = None
    model_tokens: int | None = None
    cost_units: float | None = None
    wall_ms: int | None = None

    def refusal(self, spent: Spent, family: str, elapsed_ms: int, estimate: int = 0) -> str | None:
        """Why one more ``family`` call would exceed the budget, or None. ``estimate``: the
        tokens the call may use (its ``max_tokens``), when it says."""
        if self.wall_ms is not None and elapsed_ms > self.wall_ms:
            return f"wall time {elapsed_ms} ms exceeds the budget of {self.wall_ms} ms"
        if family == "tool" and self.tool_calls is not None and spent.tool_calls >= self.tool_calls:
            return f"tool calls: {spent.tool_calls} of {self.tool_calls} spent"
        if family == "generation":
            if self.model_tokens is not None and spent.model_tokens + estimate >= self.model_tokens:
                return f"model tokens: {spent.model_tokens} (+{estimate}) of {self.model_tokens}"
            if self.cost_units is not None and spent.cost_units >= self.cost_units:
                return f"cost: {spent.cost_units:g} of {self.cost_units:g} units spent"
        return None


@dataclass(frozen=True)
class Spent:
    """What a run has spent, folded from its result journal."""

    tool_calls: int = 0
    model_tokens: int = 0
    cost_units: float = 0.0

    @classmethod
    def of(cls, entries: Iterable[ResultEntry]) -> Spent:
        out = cls()
        for e in entries:
            out = out.plus(e)
        return out

    def added(self, other: Spent) -> Spent:
        """This and ``other`` together (a child's charge added to its parent's account)."""
        return Spent(
            self.tool_calls + other.tool_calls,
            self.model_tokens + other.model_tokens,
            self.cost_units + other.cost_units,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_calls": self.tool_calls,
            "model_tokens": self.model_tokens,
            "cost_units": self.cost_units,
        }

    @classmethod
    def from_json(cls, data: Any) -> Spent:
        """From ``to_json``'s shape; ``TerminalError`` for anything else (a count that is
        not a count never reads as spending less)."""
        keys = ("tool_calls", "model_tokens", "cost_units")
        if not isinstance(data, Mapping) or set(data) != set(keys):
            raise TerminalError(f"spent is {{{', '.join(keys)}}}, got {data!r}")
        values = [data[k] for k in keys]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values) or any(
            v < 0 or v != v for v in values
        ):
            raise TerminalError(f"spent counts are numbers >= 0, got {data!r}")
        if not all(isinstance(v, int) for v in values[:2]):
            raise TerminalError(f"spent tool_calls and model_tokens are integers, got {data!r}")
        return cls(int(values[0]), int(values[1]), float(values[2]))

    def plus(self, e: ResultEntry) -> Spent:
        """This, and what ``e`` spent (a fold step: the engine adds each entry once)."""
        if e.error is not None and e.error.type in GATE_ERRORS:
            return self
        if e.family == "tool":
            return Spent(self.tool_calls + 1, self.model_tokens, self.cost_units)
        if e.family == "generation" and e.ok and e.value_json is not None:
            value = json.loads(e.value_json)
            tokens = int(value.get("tokens_in", 0)) + int(value.get("tokens_out", 0))
            cost = float(value.get("cost_units", 0.0))
            return Spent(self.tool_calls, self.model_tokens + tokens, self.cost_units + cost)
        return self


@dataclass(frozen=True)
class ReleaseGrant:
    """``data:release`` granted by policy: the agent may release ``fields`` (empty: any) for
    ``destination``, in trust when ``trust``, in sensitivity down to ``sensitivity``."""

    destination: str
    fields: tuple[str, ...] = ()
    trust: bool = True
    sensitivity: Sensitivity | None = None

    def covers(self, destination: str, path: str, trust: bool, sensitivity: str | None) -> bool:
        if destination != self.destination or (self.fields and path not in self.fields):
            return False
        if trust and not self.trust:
            return False
        if sensitivity is None:
            return True
        order = list(Sensitivity)
        return self.sensitivity is not None and order.index(Sensitivity(sensitivity)) >= (
            order.index(self.sensitivity)
        )


@dataclass(frozen=True)
class SignalTrust:
    """Signals the deployment trusts for one agent: named ``name`` (None: any name) from the
    authenticated principal ``sender`` (None: any authenticated sender). At least one is
    given: "every signal from anyone" is not a rule a policy can state by omission."""

    name: str | None = None
    sender: str | None = None

    def __post_init__(self) -> None:
        if self.name is None and self.sender is None:
            raise ConfigError("policy: a trusted_signals rule names a signal, a sender or both")
        if self.name is not None and not self.name.strip():
            raise ConfigError("policy: a trusted_signals name must not be blank")
        if self.sender is not None and not self.sender.strip():
            raise ConfigError("policy: a trusted_signals sender must not be blank")

    def covers(self, name: str, sent_by: str | None) -> bool:
        # An unauthenticated signal (no sender: written to the inbox around the endpoints)
        # is never trusted, whatever the rule says about its name.
        if sent_by is None or not sent_by.strip():
            return False
        return (self.name is None or self.name == name) and (
            self.sender is None or self.sender == sent_by
        )


@dataclass(frozen=True)
class AgentPolicy:
    """What the deployment grants one agent."""

    sinks: frozenset[str] | None = None
    releases: tuple[ReleaseGrant, ...] = ()
    release_role: str | None = None  # None: the role the release request names
    input_label: Label | None = None
    budget: Budget = field(default_factory=Budget)
    trusted_signals: tuple[SignalTrust, ...] = ()
    unattributed: str = "context"  # one of UNATTRIBUTED_RULES

    def __post_init__(self) -> None:
        if self.unattributed not in UNATTRIBUTED_RULES:
            raise ConfigError(
                f"policy: unattributed is one of {', '.join(UNATTRIBUTED_RULES)}, "
                f"got {self.unattributed!r}"
            )

    def trusts_signal(self, name: str, sent_by: str | None) -> bool:
        """Whether a signal ``name`` from ``sent_by`` is labelled trusted (else untrusted)."""
        return any(rule.covers(name, sent_by) for rule in self.trusted_signals)


@dataclass(frozen=True)
class Policy:
    """The deployment policy (see the module docstring)."""

    sinks: Mapping[str, SinkDecl] = field(default_factory=dict)
    agents: Mapping[str, AgentPolicy] = field(default_factory=dict)
    digest: str = ""
    # What the deployment says a source returns (trust, sensitivity), by journaled name: a
    # gated call's result is recorded at least this untrusted and this sensitive.
    sources: Mapping[str, Label] = field(default_factory=dict)
    # Sinks whose every proposed call a person approves first, by journaled name.
    approvals: Mapping[str, ApprovalRule] = field(default_factory=dict)
    # Queues, by capability: admission routes their runs to the queue service, which starts
    # them as the limits allow (docs/decisions.md 33).
    queues: Mapping[str, QueueLimits] = field(default_factory=dict)

    def for_agent(self, capability: str) -> AgentPolicy:
        return self.agents.get(capability) or AgentPolicy()


def sink_decl(
    policy: Policy | None, sink: str, declared: Mapping[str, SinkDecl] | None, mutating: bool
) -> SinkDecl:
    """The declaration ``sink`` is judged by: the deployment's, then the agent's own
    (``declared``, from ``@sinks``), else the default — the call's own ``mutating``, no
    egress ceiling."""
    if policy is not None and sink in policy.sinks:
        return policy.sinks[sink]
    if declared is not None and sink in declared:
        return declared[sink]
    return _default_decl(sink, mutating)


@lru_cache(maxsize=1024)
def _default_decl(sink: str, mutating: bool) -> SinkDecl:
    return SinkDecl(sink, mutating=mutating)


def parse_policy(text: str) -> Policy:
    """A ``Policy`` from its YAML text; ``ConfigError`` naming what is wrong."""
    try:
        doc = yaml.safe_load(text) or {}
        if not isinstance(doc, Mapping):
            raise ConfigError("policy: the document must be a mapping")
        digest = sha256_hex(canonical_bytes(doc))
        declared = {str(name): raw or {} for name, raw in _map(doc, "sinks").items()}
        sinks = {
            name: _sink(name, raw) for name, raw in declared.items() if set(raw) != {"approval"}
        }
        approvals = {
            name: _approval(raw["approval"])
            for name, raw in declared.items()
            if raw.get("approval") is not None
        }
        agents = {str(cap): _agent(raw or {}) for cap, raw in _map(doc, "agents").items()}
        sources = {
            str(name): _label(raw or {}, default=Sensitivity.PUBLIC, provenance=())
            for name, raw in _map(doc, "sources").items()
        }
        queues = _queues(_map(doc, "queues"))
    except ConfigError:
        raise
    except (yaml.YAMLError, TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"policy: {type(exc).__name__}: {exc}") from exc
    return Policy(
        sinks=sinks,
        agents=agents,
        digest=digest,
        sources=sources,
        approvals=approvals,
        queues=queues,
    )


# -- queues (runplane.core.queues) ------------------------------------------------------------

_QUEUE_FIELDS = frozenset({"concurrency", "per_tenant", "rate_per_s", "burst"})


def _queues(raw: Mapping[str, Any]) -> dict[str, QueueLimits]:
    """``queues: {capability: {concurrency, per_tenant, rate_per_s, burst}}``; an entry that
    limits nothing is an error (it would route runs through a queue for no reason)."""
    out = {}
    for cap, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"policy: queues.{cap} must be a mapping")
        unknown = sorted(set(entry) - _QUEUE_FIELDS)
        if unknown:
            raise ConfigError(f"policy: queues.{cap}: unknown field(s) {', '.join(unknown)}")
        limits = QueueLimits(
            concurrency=_opt_int(entry.get("concurrency")),
            per_tenant=_opt_int(entry.get("per_tenant")),
            rate_per_s=_opt_int(entry.get("rate_per_s")),
            burst=int(entry.get("burst", 1)),
        )
        if not limits.limits_anything:
            raise ConfigError(f"policy: queues.{cap} limits nothing")
        out[str(cap)] = limits
    return out


def _map(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"policy: {key} must be a mapping")
    return value


def _sink(name: str, raw: Mapping[str, Any]) -> SinkDecl:
    protected = tuple(
        FieldRule(
            path=str(r["path"]),
            trusted=bool(r.get("trusted", True)),
            sources=tuple(str(s) for s in r.get("sources", ())),
            max_sensitivity=_sensitivity(r.get("max_sensitivity")),
        )
        for r in raw.get("protected", ())
    )
    return SinkDecl(
        name,
        mutating=bool(raw.get("mutating", True)),
        ceiling=_sensitivity(raw.get("ceiling")) or Sensitivity.SECRET,
        protected=protected,
    )


def _approval(raw: Any) -> ApprovalRule:
    """``approval: finance`` (a role) or ``approval: {role:, approvals:, expires_in:}``."""
    if isinstance(raw, str):
        return ApprovalRule(role=raw)
    if not isinstance(raw, Mapping) or set(raw) - {"role", "approvals", "expires_in"}:
        raise ConfigError(
            f"policy: a sink's approval is a role or {{role:, approvals:, expires_in:}}, got {raw!r}"
        )
    return ApprovalRule(
        role=str(raw.get("role", DEFAULT_APPROVAL_ROLE)),
        approvals=int(raw.get("approvals", 1)),
        expires_in=_opt_int(raw.get("expires_in")),
    )


def _agent(raw: Mapping[str, Any]) -> AgentPolicy:
    sinks = raw.get("sinks")
    label = raw.get("input")
    budget = raw.get("budget") or {}
    return AgentPolicy(
        sinks=None if sinks is None else frozenset(str(s) for s in sinks),
        releases=tuple(
            ReleaseGrant(
                destination=str(g["destination"]),
                fields=tuple(str(f) for f in g.get("fields", ())),
                trust=bool(g.get("trust", True)),
                sensitivity=_sensitivity(g.get("sensitivity")),
            )
            for g in raw.get("release", ())
        ),
        release_role=None if raw.get("release_role") is None else str(raw["release_role"]),
        input_label=None
        if label is None
        else _label(label, default=Sensitivity.INTERNAL, provenance=("input:admission",)),
        budget=Budget(
            tool_calls=_opt_int(budget.get("tool_calls")),
            model_tokens=_opt_int(budget.get("model_tokens")),
            cost_units=None if budget.get("cost_units") is None else float(budget["cost_units"]),
            wall_ms=_opt_int(budget.get("wall_ms")),
        ),
        trusted_signals=tuple(_signal_trust(r) for r in raw.get("trusted_signals") or ()),
        unattributed=str(raw.get("unattributed", "context")),
    )


def _signal_trust(raw: Any) -> SignalTrust:
    if not isinstance(raw, Mapping) or set(raw) - {"name", "sender"}:
        raise ConfigError(f"policy: a trusted_signals rule is {{name:, sender:}}, got {raw!r}")
    name, sender = raw.get("name"), raw.get("sender")
    return SignalTrust(
        name=None if name is None else str(name), sender=None if sender is None else str(sender)
    )


def _label(raw: Mapping[str, Any], *, default: Sensitivity, provenance: tuple[str, ...]) -> Label:
    return Label(
        trust=Trust(str(raw.get("trust", "trusted")).upper()),
        sensitivity=_sensitivity(raw.get("sensitivity")) or default,
        provenance=provenance,
    )


def _sensitivity(value: Any) -> Sensitivity | None:
    return None if value is None else Sensitivity(str(value).upper())


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
