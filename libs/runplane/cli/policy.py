"""CLI: ``runplane policy check [FILE]`` — the effective policy of each agent.

The gate judges every outbound call of every run, under the deployment policy when one is
bound (``RUNPLANE_POLICY``) and the default policy otherwise (docs/security.md, "The label
model"). This prints what that means for each agent deployed here (``--agents``, default
``RUNPLANE_AGENT_MODULES``, the setting the executor imports) and each agent the policy names:
the sinks it may reach, each sink's declaration in force and whose it is (the policy's, the
agent's ``@sinks``), the rule for every other sink, how unattributed bytes are labelled, its
input label, releases and budget. With FILE it first validates the file and prints its digest —
what the executor journals with every gate and release decision.

Exit 0 with the summary; 2 with a one-line reason when the file does not parse or an agent
module does not import.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import typer

from runplane.config import Settings
from runplane.core.agents import AgentRegistry, import_agent_modules
from runplane.core.gate import SinkDecl, declared_sinks
from runplane.core.policy import AgentPolicy, Policy, parse_policy, sink_decl
from runplane.errors import ConfigError

EXIT_INVALID = 2

policy_app = typer.Typer(help="The deployment policy (RUNPLANE_POLICY): sinks, grants, budgets.")


@policy_app.command("check")
def check(
    path: Path | None = typer.Argument(None, help="The policy YAML file (none: the default)."),
    agents: str | None = typer.Option(
        None, "--agents", help="Agent modules, comma-separated (default RUNPLANE_AGENT_MODULES)."
    ),
) -> None:
    """Validate the policy as the executor would; print each agent's effective policy."""
    try:
        policy = None if path is None else parse_policy(path.read_text(encoding="utf-8"))
    except (OSError, ConfigError) as exc:
        _invalid(str(path), exc)
    try:
        modules = (
            Settings.from_env().agent_modules
            if agents is None
            else tuple(m.strip() for m in agents.split(",") if m.strip())
        )
        registry = import_agent_modules(modules)
    except ConfigError as exc:
        _invalid("agents", exc)
    if policy is None:
        typer.echo("no deployment policy: the default policy holds")
    else:
        typer.echo(f"digest {policy.digest}")
        typer.echo(f"sinks: {', '.join(sorted(policy.sinks)) or '-'}")
    named = {} if policy is None else dict(policy.agents)
    for capability in sorted(set(named) | set(registry)):
        _agent(capability, policy, registry, capability in named)


def _invalid(where: str, exc: Exception) -> NoReturn:
    typer.echo(f"{where}: {' '.join(str(exc).split())}", err=True)
    raise typer.Exit(EXIT_INVALID) from exc


def _agent(capability: str, policy: Policy | None, registry: AgentRegistry, named: bool) -> None:
    granted = AgentPolicy() if policy is None else policy.for_agent(capability)
    declared = declared_sinks(registry.spec(capability).fn) if capability in registry else None
    deployed = "" if capability in registry else "; not deployed here"
    reach = "any sink" if granted.sinks is None else ", ".join(sorted(granted.sinks))
    releases = ", ".join(f"{g.destination} {list(g.fields) or '*'}" for g in granted.releases)
    typer.echo(
        f"agent {capability}: {reach}; releases by policy: {releases or '-'}; "
        f"others decided by {granted.release_role or 'the role each release names'}; "
        f"budget {granted.budget}{deployed}"
    )
    if named and granted.trusted_signals:
        trusted = ", ".join(
            f"{rule.name or '*'} from {rule.sender or 'any authenticated sender'}"
            for rule in granted.trusted_signals
        )
        typer.echo(f"agent {capability}: trusted signals: {trusted}")
    for sink in sorted(set(policy.sinks if policy is not None else ()) | set(declared or ())):
        decl = sink_decl(policy, sink, declared, mutating=True)
        whose = "policy" if policy is not None and sink in policy.sinks else "@sinks"
        typer.echo(f"agent {capability}: sink {sink}: {_describe(decl)} ({whose})")
    typer.echo(
        f"agent {capability}: any other sink: as the call declares it; a mutating one refuses "
        "untrusted arguments; no egress ceiling"
    )
    rule = (
        "the agent's own (WEAKER: re-chunked untrusted text passes as trusted)"
        if granted.unattributed == "agent"
        else "the run's context (untrusted once it has read anything untrusted)"
    )
    label = granted.input_label
    given = "trusted internal" if label is None else f"{label.trust} {label.sensitivity}".lower()
    typer.echo(f"agent {capability}: unattributed bytes: {rule}; input: {given}")


def _describe(decl: SinkDecl) -> str:
    kind = "mutating" if decl.mutating else "read-only"
    fields: Mapping[str, str] = {
        r.path: (f"from {' or '.join(r.sources)}" if r.sources else "trusted" if r.trusted else "-")
        for r in decl.protected
    }
    protected = "; ".join(f"{p} {rule}" for p, rule in fields.items())
    return f"{kind}, ceiling {str(decl.ceiling).lower()}" + (
        f", protected {protected}" if protected else ""
    )


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
