"""A mutating tool that reconciles must carry the call's idempotency key to its peer.

``reconcile`` recovery asks the tool's probe whether a call in doubt took effect. A probe
cannot see a request still in flight: after a SIGKILL between the announce and the peer's
answer, the killed owner's request may reach the peer after the probe said "not applied",
and the call performed again would then be applied twice — unless the peer dedupes it by the
call's key. So a tool declared mutating with recovery ``reconcile`` is refused when it is
registered unless it passes the key (``carries_key`` of each tool kind): an HTTP tool always
sends it in a header; a ``@tool`` function takes an ``idempotency_key`` parameter; an MCP
tool's input schema, as its server lists it, has an ``idempotency_key`` property.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from runplane.core.agents import AgentSpec, EffectDecl, Recovery, Tool
from runplane.errors import ConfigError

REASON: Final = "a probe cannot see a request still in flight: reconcile needs an idempotency key"


def needs_key(decl: EffectDecl) -> bool:
    """Whether a call performed under ``decl`` must carry its idempotency key to the peer."""
    return decl.mutating and decl.effective_recovery is Recovery.RECONCILE


def require_key(decl: EffectDecl, *, carries: bool, lacks: str) -> None:
    """Refuse ``decl`` (a ``ConfigError`` naming the tool and the reason) when it reconciles a
    mutation and the tool does not carry the key; ``lacks`` says what the tool is missing."""
    if needs_key(decl) and not carries:
        raise ConfigError(
            f"tool {decl.name}: mutating with recovery 'reconcile', but {lacks}; {REASON} "
            "(pass it to the peer, or declare recovery requires_operator)"
        )


def refuse_unkeyed(tools: Mapping[str, Tool], agents: Iterable[AgentSpec]) -> None:
    """The same refusal for the agents' own declarations: an agent that declares
    ``reconcile`` for a mutating tool the executor offers without carrying the key (a tool
    declared otherwise, or a function taking no key) is refused at start-up, not at its
    first crash."""
    for spec in agents:
        for name, decl in spec.effects.items():
            tool = tools.get(name)
            if tool is None or getattr(tool, "carries_key", False):
                continue
            if needs_key(decl):
                raise ConfigError(
                    f"agent {spec.capability} declares tool {name} mutating with recovery "
                    f"'reconcile', but the tool does not pass its idempotency key; {REASON}"
                )
