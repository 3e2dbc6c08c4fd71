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

A child run *runs under* the delegation it was commissioned with (``confines``: its sinks
and its validity bound every outbound call it makes), and what it hands a grandchild is
rebuilt ``under`` it — link by link through the constructor — so it can only narrow further.

What a commissioned run runs under travels as one JSON document (``delegation_json``),
``Bounds``: the delegation's chain, and the **allotment** its parent handed it
(``core.allotments``: what it may spend, its own children included) — ``{chain: [scope, …]}``,
``{chain: […], allotment: {…}}`` or ``{allotment: {…}}`` (a parent that held no delegation
but a bounded budget). Without ``allotment`` the run is bounded in money by policy alone, so
every document written before allotments existed reads as it always did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.core.allotments import Allotment
from runplane.core.policy import Spent
from runplane.errors import TerminalError

__all__ = ["EXPIRED", "NOT_DELEGATED", "Bounds", "Delegation", "DelegationWidened", "Scope"]

# Why ``Delegation.confines`` says no (the sink gate's ``Reason`` values of the same name).
NOT_DELEGATED: Final = "not_delegated"
EXPIRED: Final = "delegation_expired"


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

    def under(self, parent: Delegation) -> Delegation:
        """This delegation as handed on by a run that itself runs under ``parent``: unchanged
        when its chain already extends ``parent``'s, else ``parent``'s chain followed by each of
        its links — through the constructor, so a link wider than what it now follows (a fresh
        root granting more than the run holds) raises ``DelegationWidened``."""
        mine, held = self.chain, parent.chain
        if mine[: len(held)] == held:
            return self
        out = parent
        for link in mine:
            out = Delegation(link, out)
        return out

    def confines(self, sink: str | None, now_ms: int) -> tuple[str, str] | None:
        """Why a run under this delegation may not call ``sink`` at ``now_ms`` — (``EXPIRED``
        | ``NOT_DELEGATED``, a sentence) — or None. ``sink`` None: validity only (a commission,
        whose target ``admits`` checks against ``capabilities``)."""
        if not self.valid_at(now_ms):
            return EXPIRED, f"the run's delegation expired at {self._scope.not_after_ms}"
        if sink is not None and sink not in self._scope.sinks:
            return NOT_DELEGATED, f"the run's delegation does not include the sink {sink}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"chain": [link.to_json() for link in self.chain]}

    @classmethod
    def read(cls, text: str) -> Delegation:
        """From its JSON text (a StartRun's or snapshot's ``delegation_json``): a widening
        chain, or text that is not a delegation at all, is a ``TerminalError``."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TerminalError(f"a delegation is JSON: {exc}") from exc
        return cls.from_json(data)

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


@dataclass(frozen=True)
class Bounds:
    """What a commissioned run runs under (``delegation_json``): its delegation (None: scope
    bounded by policy alone), its allotment (None: money bounded by policy alone) and what
    the generations before it spent under that allotment (``spent``: a continue-as-new
    successor's, counted into its account, so a chain of generations shares one allotment)."""

    delegation: Delegation | None = None
    allotment: Allotment | None = None
    spent: Spent | None = None

    def __post_init__(self) -> None:
        if self.spent is not None and self.allotment is None:
            raise TerminalError("a delegation's spent counts against its allotment: give both")

    def to_json(self) -> dict[str, Any]:
        """Without an allotment exactly ``Delegation.to_json`` (the bytes it always had)."""
        out = {} if self.delegation is None else self.delegation.to_json()
        if self.allotment is not None:
            out["allotment"] = self.allotment.to_json()
        if self.spent is not None:
            out["spent"] = self.spent.to_json()
        return out

    def carried(self) -> bool:
        """Whether there is anything to carry (else the child gets no ``delegation_json``)."""
        return self.delegation is not None or self.allotment is not None

    @classmethod
    def read(cls, text: str) -> Bounds:
        """From its JSON text; ``TerminalError`` for a widening chain, a bad allotment or
        text that is neither (a document with neither a chain nor an allotment included)."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TerminalError(f"a delegation is JSON: {exc}") from exc
        if (
            not isinstance(data, Mapping)
            or not {"chain", "allotment"} & set(data)
            or set(data) - {"chain", "allotment", "spent"}
        ):
            raise TerminalError(
                "a delegation is {chain: [scope, …], allotment: {…}, spent: {…}}, "
                "with a chain, an allotment or both"
            )
        delegation = None if "chain" not in data else Delegation.from_json({"chain": data["chain"]})
        allotment = None if "allotment" not in data else Allotment.from_json(data["allotment"])
        spent = None if "spent" not in data else Spent.from_json(data["spent"])
        return cls(delegation, allotment, spent)
