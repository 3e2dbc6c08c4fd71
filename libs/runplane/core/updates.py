"""Updates and queries: asking a live run something and getting its answer.

An **update** is a signal that answers. The agent declares it, with a validator::

    def check_item(payload):                     # pure: the payload alone, no I/O, no clock
        if not payload.get("sku"):
            return "an item names its sku"       # refused, with this reason (or raise UpdateRefused)
        return None                              # accepted

    @agent("cart", updates=[UpdateDecl("add_item", validate=check_item)])
    async def cart(ctx, input):
        items = []
        while len(items) < input["max"]:
            update = await ctx.wait_update("add_item")            # -> Update
            items.append(update.payload)
            await ctx.answer(update, {"count": len(items)})        # back to the caller
        ...

The validator runs when the update reaches the run, *before anything is journaled*: a refused
update leaves no record and the caller gets the reason. An accepted one is journaled (the
agent's ``wait_update`` is a slot like ``wait_signal``'s, served from the journal on replay),
and so is the answer (``ctx.answer``), which the executor sends back to the caller
(``UpdateAnswer`` on ``runs.updates``). One update per update id: an id delivered again is
answered with the first answer, never handled twice — decided from the run's journal.

A **query** reads a run without changing it: a declared pure function over the state of the
run's last ``ctx.checkpoint`` (None before one), answered outside the run (admission's
``GET /runs/{run}/queries/{name}``) — nothing is journaled, and the run is not woken::

    @agent("cart", queries=[QueryDecl("items", lambda state, args: state["items"])])

Pure: no I/O. The engine's side is ``runplane.core.engine.updates``; docs/contracts.md,
"Updates and queries", says what goes over the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from runplane.errors import TerminalError

__all__ = [
    "UPDATE_PREFIX",
    "QueryDecl",
    "QueryFailed",
    "Update",
    "UpdateDecl",
    "UpdateRefused",
    "answer_query",
    "refusal",
    "update_name",
    "wire_name",
]

# An update travels to its run as the reserved signal ``runplane.update/<name>`` (its
# ``signal_id`` is the update id): the signal names under ``runplane.`` are the platform's.
UPDATE_PREFIX: Final = "runplane.update/"

Validator = Callable[[Any], "str | None"]
QueryFn = Callable[[Any, Any], Any]


class UpdateRefused(Exception):
    """Raised by a validator: the update is refused with ``reason`` (returning the reason
    does the same)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class QueryFailed(TerminalError):
    """A query could not be answered: ``code`` ``unknown_query`` (the agent declares none of
    that name) or ``query_failed`` (the function raised; ``reason`` says what)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class UpdateDecl:
    """An update the agent handles: its ``name`` and its ``validate`` (pure, of the payload:
    None or nothing to accept, a reason — or ``UpdateRefused`` — to refuse). No validator:
    every payload is accepted."""

    name: str
    validate: Validator | None = None

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("runplane."):
            raise ValueError(
                f"an update needs a name without '/' or 'runplane.', got {self.name!r}"
            )


@dataclass(frozen=True)
class QueryDecl:
    """A query the agent answers: ``fn(state, args)``, pure, over the state of the run's last
    checkpoint (None before one) and the caller's ``args``."""

    name: str
    fn: QueryFn

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"a query needs a name without '/', got {self.name!r}")


@dataclass(frozen=True)
class Update:
    """What ``ctx.wait_update`` returns: the update's id, its name, its payload and who sent it
    (the authenticated principal; None when the sender was not named)."""

    update_id: str
    name: str
    payload: Any
    sent_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "update_id": self.update_id,
            "name": self.name,
            "payload": self.payload,
            "sent_by": self.sent_by,
        }

    @classmethod
    def from_json(cls, value: Any) -> Update:
        sent_by = value.get("sent_by")
        return cls(
            update_id=str(value["update_id"]),
            name=str(value["name"]),
            payload=value.get("payload"),
            sent_by=None if sent_by is None else str(sent_by),
        )


def wire_name(name: str) -> str:
    """The reserved signal name an update ``name`` travels under."""
    return UPDATE_PREFIX + name


def update_name(signal_name: str) -> str | None:
    """The update a signal name carries, or None for a plain signal."""
    return (
        signal_name.removeprefix(UPDATE_PREFIX) if signal_name.startswith(UPDATE_PREFIX) else None
    )


def refusal(decl: UpdateDecl | None, name: str, payload: Any) -> tuple[str, str] | None:
    """Why the update ``name`` with ``payload`` is refused, as (code, reason), or None when
    accepted. ``decl``: the agent's declaration of it (None: it declares no such update). A
    validator that raises anything but ``UpdateRefused`` refuses too (the agent's bug is
    named, never the run's crash)."""
    if decl is None:
        return "unknown_update", f"the agent handles no update {name!r}"
    if decl.validate is None:
        return None
    try:
        reason = decl.validate(payload)
    except UpdateRefused as exc:
        return "invalid", exc.reason or f"update {name!r} refused"
    except Exception as exc:
        return "invalid", f"update {name!r}: its validator raised {type(exc).__name__}: {exc}"
    if reason is None:
        return None
    return "invalid", str(reason) or f"update {name!r} refused"


def answer_query(decl: QueryDecl | None, name: str, state: Any, args: Any) -> Any:
    """The query's answer over ``state`` (the last checkpoint's); ``QueryFailed`` when the
    agent declares no such query or its function raised."""
    if decl is None:
        raise QueryFailed("unknown_query", f"the agent answers no query {name!r}")
    try:
        return decl.fn(state, args)
    except Exception as exc:
        raise QueryFailed(
            "query_failed", f"query {name!r} raised {type(exc).__name__}: {exc}"
        ) from None
