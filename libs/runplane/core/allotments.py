"""Budgets over a tree: what a run allots the children it commissions. Pure.

A run's **ceiling** is its deployment policy's budget (``policy.Budget``) met with the
**allotment** its delegation carries, unit by unit (``ceiling``): a run admitted without one is
bounded by policy alone, as before. The units that add up over a tree are the ones the gate
counts from a run's result journal (``policy.Spent``): tool calls, model tokens, cost units.
Wall time is not one of them (children run side by side); a delegation's ``not_after_ms`` and
each run's own ``wall_ms`` bound time.

A run's **account** is what it has spent itself (folded from its result journal) plus one
**charge** per child it commissioned (``Ledger``):

- **Escrow.** Commissioning a child allots part of what the run has left (``allot``: all of it
  by default — the engine asks an even share for each of several commissions dispatched
  together that declare none — or the commission's declared share or amounts, never more
  than is left) and
  charges the whole allotment to the run at once — before the child has spent anything — so
  ten children dispatched in one step share what the parent had, they do not each get it.
- **Settlement.** The child's result says what the child's own account came to (counted by
  the child's executor from the child's journal, its own children's charges included): that
  replaces the escrow (``settle``), and the unspent rest is the parent's again. A key is
  settled once; a second result for it changes nothing, so a return is never counted twice.
  A child that never answers (its parent ended first, a result that does not read) stays
  charged its whole allotment: the account never counts less than was possibly spent.
- **Refusal.** A run that has nothing left in a unit its ceiling bounds cannot commission
  (``allot`` says why: the commission fails ``BudgetExceeded``), and the gate refuses it the
  calls its ceiling forbids, its children's charges counted (``policy.Budget.refusal``).

So a tree spends at most its root's ceiling, whatever its fan-out: a child's ceiling is what
its parent escrowed for it, and every escrow is within what the parent had left. Exactly so
for tool calls (each counts one, checked before it is made). A model call's tokens and cost
are known only once it is made, and the gate admits the call while the account is below the
ceiling (tokens: with the call's ``max_tokens`` added) — so, as for any run, the last call a
run makes may take it past its ceiling by what that call cost; over a tree, by at most one
such call per run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.core.policy import Budget, Spent
from runplane.errors import TerminalError

__all__ = [
    "UNITS",
    "Allotment",
    "Charge",
    "Ledger",
    "account",
    "allot",
    "ask_json",
    "ceiling",
    "charge_of",
    "escrow",
    "left",
    "read_ask",
    "settle",
]

# The units a tree's budget is counted in: Budget's, Spent's and Allotment's field names.
UNITS: Final = ("tool_calls", "model_tokens", "cost_units")
_WORDS: Final = {"tool_calls": "tool calls", "model_tokens": "model tokens", "cost_units": "cost"}


@dataclass(frozen=True)
class Allotment:
    """What a run may spend in each unit, handed to it by the run that commissioned it;
    None: not bounded by the allotment in that unit (the policy may still bound it)."""

    tool_calls: int | None = None
    model_tokens: int | None = None
    cost_units: float | None = None

    def __post_init__(self) -> None:
        for unit in UNITS:
            value = getattr(self, unit)
            if value is None:
                continue
            integral = unit != "cost_units"
            if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)):
                kind = "an integer" if integral else "a number"
                raise TerminalError(f"an allotment's {unit} is {kind} or null, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise TerminalError(f"an allotment's {unit} must be >= 0, got {value!r}")
            if not integral:
                object.__setattr__(self, unit, float(value))

    def bounded(self) -> bool:
        """Whether it bounds anything (an allotment that bounds nothing is not carried)."""
        return any(getattr(self, unit) is not None for unit in UNITS)

    def to_json(self) -> dict[str, Any]:
        """The bounded units only: ``{"tool_calls": 3}`` bounds tool calls alone."""
        return {unit: getattr(self, unit) for unit in UNITS if getattr(self, unit) is not None}

    @classmethod
    def from_json(cls, data: Any) -> Allotment:
        if not isinstance(data, Mapping) or not set(data) <= set(UNITS):
            raise TerminalError(f"an allotment is a mapping of {', '.join(UNITS)}, got {data!r}")
        return cls(**{str(k): v for k, v in data.items()})

    def as_spent(self) -> Spent:
        """The allotment charged whole (an escrow): an unbounded unit charges nothing."""
        return Spent(self.tool_calls or 0, self.model_tokens or 0, self.cost_units or 0.0)


@dataclass(frozen=True)
class Charge:
    """One child's line in its parent's account: what was allotted to it and, once its
    result came back, what it reported spending (None: still escrowed whole)."""

    allotted: Allotment
    spent: Spent | None = None

    def charged(self) -> Spent:
        return self.allotted.as_spent() if self.spent is None else self.spent


# A run's charges, by the child's admission key, sorted: an immutable value (a family part).
Ledger = tuple[tuple[str, Charge], ...]


def ceiling(budget: Budget, allotment: Allotment | None) -> Budget:
    """The run's bound in every unit: the policy's budget met with its allotment."""
    if allotment is None:
        return budget
    bounds = {unit: _least(getattr(budget, unit), getattr(allotment, unit)) for unit in UNITS}
    return Budget(wall_ms=budget.wall_ms, **bounds)


def account(own: Spent, ledger: Ledger) -> Spent:
    """What the run counts as spent: its own calls and every child's charge."""
    out = own
    for _, charge in ledger:
        out = out.added(charge.charged())
    return out


def left(bound: Budget, spent: Spent) -> Allotment:
    """What the run has left in each unit its ceiling bounds (never below nothing)."""
    values: dict[str, Any] = {}
    for unit in UNITS:
        limit = getattr(bound, unit)
        values[unit] = None if limit is None else max(limit - getattr(spent, unit), 0)
    return Allotment(**values)


def allot(bound: Budget, spent: Spent, ask: Allotment | float | None = None) -> Allotment | str:
    """What a run with ceiling ``bound`` and account ``spent`` allots a child it commissions,
    or why it cannot (it has nothing left in a unit its ceiling bounds).

    ``ask``: None — all it has left; a share in (0, 1] of what it has left (rounded up in
    the integral units: at least one while any is left, never more than is); or amounts, each capped at what it has left (an amount in a unit the
    run is not bounded in bounds the child there). An unbounded result bounds nothing (the
    child is bounded by its policy alone, as a run the commissioning run could not bound)."""
    have = left(bound, spent)
    empty = [unit for unit in UNITS if getattr(have, unit) is not None and getattr(have, unit) <= 0]
    if empty:
        said = "; ".join(
            f"{_WORDS[u]}: {getattr(spent, u):g} of {getattr(bound, u):g} spent or allotted"
            for u in empty
        )
        return f"nothing left to allot a child ({said})"
    values: dict[str, Any] = {}
    for unit in UNITS:
        mine = getattr(have, unit)
        if ask is None:
            values[unit] = mine
        elif isinstance(ask, Allotment):
            values[unit] = _least(mine, getattr(ask, unit))
        elif mine is not None:
            part = mine * ask
            values[unit] = part if unit == "cost_units" else math.ceil(part)
    return Allotment(**values)


def escrow(ledger: Ledger, key: str, allotment: Allotment) -> Ledger:
    """``ledger`` charging the child ``key`` its whole allotment (unchanged when it already
    holds that key: a replayed or restored commission of the same child)."""
    if any(k == key for k, _ in ledger):
        return ledger
    return tuple(sorted((*ledger, (key, Charge(allotment))), key=lambda kc: kc[0]))


def settle(ledger: Ledger, key: str, spent: Spent) -> Ledger:
    """``ledger`` charging the child ``key`` what it reported spending instead of its escrow;
    unchanged when the key is unknown or already settled (a return is counted once)."""
    out = []
    for k, charge in ledger:
        if k == key and charge.spent is None:
            charge = Charge(charge.allotted, spent)
        out.append((k, charge))
    return tuple(out)


def charge_of(ledger: Ledger, key: str) -> Charge | None:
    """The child ``key``'s charge, if the run allotted it anything."""
    return next((charge for k, charge in ledger if k == key), None)


def read_ask(data: Any) -> Allotment | float | None:
    """A commission's declared budget as its request carries it: absent, ``{"share": x}``
    with 0 < x <= 1, or amounts (``Allotment.to_json``); ``TerminalError`` otherwise."""
    if data is None:
        return None
    if isinstance(data, Mapping) and set(data) == {"share"}:
        share = data["share"]
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise TerminalError(f"a commission's budget share is in (0, 1], got {share!r}")
        return float(share)
    return Allotment.from_json(data)


def ask_json(ask: Allotment | float) -> dict[str, Any]:
    """How a commission's request carries its declared budget (``read_ask`` reads it)."""
    if isinstance(ask, Allotment):
        return ask.to_json()
    read_ask({"share": ask})  # the same rule when it is built as when it is read
    return {"share": float(ask)}


def _least(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return a if b is None else min(a, b)
