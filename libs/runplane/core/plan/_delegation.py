"""Delegation: the authority a run hands to a peer it commissions — and it can only narrow. Pure.

A ``Delegation`` is a chain of ``Scope``s from a root (granted by policy) to the link a
commission carries. Each link may only narrow its parent, in every dimension:

- **scope**: ``capabilities`` (agents it may commission) and ``sinks`` (where it may send)
  are subsets of the parent's;
- **validity**: ``not_after_ms`` is no later than the parent's (``None`` = no expiry, allowed
  only under a parent without one);
- **audience**: the principals/capabilities that may present it are a subset of the parent's.

Widening is unconstructible rather than detected: ``Delegation.__init__`` refuses a link
wider than its parent (``DelegationWidened``), ``delegate`` goes through it, and so does
``Delegation.from_json`` — deserializing is a construction path too, so a stored or
transmitted chain that widens anywhere is a read error, never a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.errors import TerminalError

__all__ = ["Delegation", "DelegationWidened", "Scope"]


class DelegationWidened(TerminalError):
    """A link would grant more than its parent; ``widened`` names each dimension."""

    def __init__(self, widened: Iterable[str]) -> None:
        self.widened = tuple(widened)
        super().__init__("a delegation may only narrow: widens " + "; ".join(self.widened))


@dataclass(frozen=True)
class Scope:
    """One link's grant. Sets are frozen and sorted in JSON, so equal scopes hash equally."""

    capabilities: frozenset[str]
    sinks: frozenset[str]
    audience: frozenset[str]
    not_after_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("capabilities", "sinks", "audience"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise TerminalError(f"delegation {name} must be a set of non-empty names")
            object.__setattr__(self, name, frozenset(value))
        if self.not_after_ms is not None and (
            isinstance(self.not_after_ms, bool) or not isinstance(self.not_after_ms, int)
        ):
            raise TerminalError("delegation not_after_ms must be an integer or null")

    def widenings(self, parent: Scope) -> list[str]:
        """How this scope exceeds ``parent`` (empty: it narrows or equals it)."""
        out = [
            f"{name} {sorted(getattr(self, name) - getattr(parent, name))}"
            for name in ("capabilities", "sinks", "audience")
            if getattr(self, name) - getattr(parent, name)
        ]
        if parent.not_after_ms is not None and (
            self.not_after_ms is None or self.not_after_ms > parent.not_after_ms
        ):
            out.append(f"validity past {parent.not_after_ms}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "capabilities": sorted(self.capabilities),
            "sinks": sorted(self.sinks),
            "audience": sorted(self.audience),
            "not_after_ms": self.not_after_ms,
        }

    @classmethod
    def from_json(cls, data: Any) -> Scope:
        if not isinstance(data, Mapping) or set(data) != {
            "capabilities",
            "sinks",
            "audience",
            "not_after_ms",
        }:
            raise TerminalError(
                "a delegation scope is {capabilities, sinks, audience, not_after_ms}"
            )
        lists = [data[k] for k in ("capabilities", "sinks", "audience")]
        if not all(isinstance(v, list) for v in lists):
            raise TerminalError("delegation capabilities, sinks and audience are lists")
        return cls(
            frozenset(lists[0]), frozenset(lists[1]), frozenset(lists[2]), data["not_after_ms"]
        )


class Delegation:
    """A chain of scopes, each no wider than the one before (see the module docstring)."""

    __slots__ = ("_parent", "_scope")

    def __init__(self, scope: Scope, parent: Delegation | None = None) -> None:
        if parent is not None:
            widened = scope.widenings(parent.scope)
            if widened:
                raise DelegationWidened(widened)
        self._scope = scope
        self._parent = parent

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def parent(self) -> Delegation | None:
        return self._parent

    @property
    def chain(self) -> tuple[Scope, ...]:
        """Root first."""
        links: list[Scope] = []
        node: Delegation | None = self
        while node is not None:
            links.append(node.scope)
            node = node.parent
        return tuple(reversed(links))

    def delegate(
        self,
        *,
        capabilities: Iterable[str] | None = None,
        sinks: Iterable[str] | None = None,
        audience: Iterable[str] | None = None,
        not_after_ms: int | None = None,
    ) -> Delegation:
        """A narrower link under this one; a dimension left out is inherited unchanged."""
        s = self._scope
        scope = Scope(
            s.capabilities if capabilities is None else frozenset(capabilities),
            s.sinks if sinks is None else frozenset(sinks),
            s.audience if audience is None else frozenset(audience),
            s.not_after_ms if not_after_ms is None else not_after_ms,
        )
        return Delegation(scope, self)

    def valid_at(self, now_ms: int) -> bool:
        return self._scope.not_after_ms is None or now_ms <= self._scope.not_after_ms

    def admits(self, *, capability: str, presenter: str) -> bool:
        """May ``presenter`` use this delegation to commission ``capability``?"""
        return capability in self._scope.capabilities and presenter in self._scope.audience

    def to_json(self) -> dict[str, Any]:
        return {"chain": [link.to_json() for link in self.chain]}

    @classmethod
    def from_json(cls, data: Any) -> Delegation:
        """Rebuild through the constructor, link by link: a widening link is refused here."""
        if (
            not isinstance(data, Mapping)
            or not isinstance(data.get("chain"), list)
            or not data["chain"]
        ):
            raise TerminalError("a delegation is {chain: [scope, …]} with at least the root")
        out: Delegation | None = None
        for link in data["chain"]:
            out = cls(Scope.from_json(link), out)
        assert out is not None
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Delegation) and self.chain == other.chain

    def __hash__(self) -> int:
        return hash(self.chain)

    def __repr__(self) -> str:
        return f"Delegation({self._scope!r}, depth={len(self.chain)})"
