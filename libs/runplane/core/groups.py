"""Effect groups: several tool calls that take together, or not at all.

    async with ctx.group("checkout", ["inventory", "notify"]) as g:
        hold = await g.reversible("inventory", "reserve", {"sku": sku},
                                  undo=lambda out: ("release", {"hold": out["hold"]}))
        g.deferred("notify", "send_mail", {"text": "order confirmed"})   # does not run yet
        await g.commit(invariants=[("the hold covers the order", hold["qty"] >= qty)])

- **Membership is declared up front.** A member name the group did not declare is refused
  (``GroupRefused``), and so is a member used twice: the journal's ``open`` record names the
  whole group before any of it acts.
- **A reversible member** is performed at once (an ordinary journaled ``ctx.tool`` call) and
  registers the *concrete* undo built from what it actually returned — no undo logic has to
  guess what a failed step left behind.
- **A deferred member** does not run until ``commit``: it leaves no trace anyone saw if the
  group is abandoned, which a run-then-compensate member cannot promise.
- **commit** is the frontier. The invariants are checked there; if one fails the group is
  abandoned (``InvariantFailed``). Otherwise the commit is journaled and only then are the
  deferred members released, in declaration order. Past commit there is no group: a later
  failure, even of a deferred member, does not unwind — undoing a committed group would
  reverse a decision the world has acted on.
- **Abandonment** (a failed invariant, an exception leaving the block, or leaving it without
  commit) reverses what is left standing, newest first, through journaled tool calls; deferred
  members never run. Leaving without commit also raises ``GroupAbandoned``: a group that
  commits by being forgotten would make the most consequential outcome the one you get by
  writing nothing.
- **Doubt reverses nothing.** A member whose call failed has no output to build an undo from;
  when its outcome is in doubt (an operator abandoned the in-doubt call, or it failed with a
  transient error after its retries) it is recorded as ``in_doubt`` and left alone.
- **A crash is not an abandonment.** Eviction or a crash closes the agent's coroutine
  (``GeneratorExit``); the group does nothing then, and the replay resumes exactly where the
  run was — mid-reversal included, because each undo is a journaled call served from the
  result journal (so each undo is performed once).

A group lives in the agent's coroutine and is rebuilt by running its block again: on replay,
and in a checkpointed agent's new era, whose members are then served from the side-effect
log. So a checkpointed agent resuming from a checkpoint taken *inside* a block must re-enter
the block from its start (its reversible members are served, not re-performed), not skip to
the middle, or the new era's group would know nothing of what the old one left standing.

Every decision (open, commit, abandon, and what the abandonment reversed) is journaled as an
effect of family ``group`` named ``group:<name>`` whose request carries the decision, so the
chain shows what the group decided and a replay that decides differently is quarantined by
the witness check instead of silently taking another path.

Pure: everything here is built on ``StepCtx``; nothing touches the engine's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from runplane.core.agents import Recovery
from runplane.core.effect import Effect, EffectError, Op

if TYPE_CHECKING:
    from runplane.core.ctx import StepCtx

__all__ = [
    "Group",
    "GroupAbandoned",
    "GroupError",
    "GroupRefused",
    "Invariant",
    "InvariantFailed",
    "UndoFn",
]

# undo(output) -> (tool, args) or (tool, args, idempotency_key)
UndoFn = Callable[[Any], tuple[Any, ...]]


class GroupError(EffectError):
    """Base of the effect-group errors; an agent may catch them like any ``EffectError``."""


class GroupRefused(GroupError):
    """The group was used in a way it does not allow (an undeclared or reused member, a call
    after the group settled, an undo that cannot be built). Raised inside the block, so the
    group is abandoned by it."""

    def __init__(self, group: str, message: str) -> None:
        super().__init__("GroupRefused", f"group {group!r}: {message}")
        self.group = group


class GroupAbandoned(GroupError):
    """The group was abandoned: what stood was reversed (``reversed``, newest first), deferred
    members never ran (``not_run``); members in doubt or failed were left alone
    (``in_doubt``, ``failed``); undos that failed are in ``undo_failed`` (member → error)."""

    def __init__(
        self,
        group: str,
        reason: str,
        *,
        reversed_: tuple[str, ...] = (),
        in_doubt: tuple[str, ...] = (),
        failed: tuple[str, ...] = (),
        not_run: tuple[str, ...] = (),
        left_standing: tuple[str, ...] = (),
        undo_failed: Mapping[str, str] | None = None,
        type_: str = "GroupAbandoned",
    ) -> None:
        self.group = group
        self.reason = reason
        self.reversed = reversed_
        self.in_doubt = in_doubt
        self.failed = failed
        self.not_run = not_run
        self.left_standing = left_standing
        self.undo_failed = dict(undo_failed or {})
        parts = [f"group {group!r} abandoned: {reason}", f"reversed {list(reversed_)}"]
        for label, names in (
            ("in doubt (not reversed)", in_doubt),
            ("failed", failed),
            ("never ran", not_run),
            ("left standing", left_standing),
            ("undo failed", tuple(self.undo_failed)),
        ):
            if names:
                parts.append(f"{label} {list(names)}")
        super().__init__(type_, "; ".join(parts))


class InvariantFailed(GroupAbandoned):
    """``commit`` found an invariant that does not hold; the group was abandoned.
    ``invariants`` names the ones that failed."""

    def __init__(self, group: str, invariants: tuple[str, ...], **summary: Any) -> None:
        self.invariants = invariants
        super().__init__(
            group, f"invariant failed: {', '.join(invariants)}", type_="InvariantFailed", **summary
        )


@dataclass(frozen=True)
class Invariant:
    """A named condition checked at commit; ``holds`` must be a real ``bool`` (a truthy list
    or a non-empty string passing for "true" is how an invariant silently stops checking)."""

    name: str
    holds: bool

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("an invariant needs a name")
        if not isinstance(self.holds, bool):
            raise ValueError(
                f"invariant {self.name!r}: holds must be a bool, got {type(self.holds).__name__}"
            )


@dataclass(frozen=True)
class _Undo:
    member: str
    tool: str
    args: Mapping[str, Any]
    idempotency_key: str | None


@dataclass(frozen=True)
class _Deferred:
    member: str
    tool: str
    args: Mapping[str, Any]
    idempotency_key: str | None
    mutating: bool | None
    recovery: Recovery | str | None


class Group:
    """One effect group inside a run; use it as ``async with ctx.group(name, members) as g``.

    Not a wire type: it lives inside the agent's coroutine and is rebuilt by replay like any
    other local state of the agent.
    """

    def __init__(self, ctx: StepCtx, name: str, members: Iterable[str]) -> None:
        if not isinstance(name, str) or not name.strip():
            raise GroupRefused(str(name), "a group needs a name")
        declared = tuple(members) if not isinstance(members, str) else (members,)
        if not declared:
            raise GroupRefused(name, "declare at least one member")
        for member in declared:
            if not isinstance(member, str) or not member.strip():
                raise GroupRefused(name, f"member names must be non-empty strings, got {member!r}")
        if len(set(declared)) != len(declared):
            raise GroupRefused(name, f"member names must be unique, got {list(declared)}")
        self._ctx = ctx
        self.name = name
        self.members = declared
        self._entered = False
        self._settled: str | None = None  # "committed" | "abandoned"
        self._used: set[str] = set()
        self._standing: list[_Undo] = []
        self._deferred: list[_Deferred] = []
        self._in_doubt: list[str] = []
        self._failed: list[str] = []
        self._no_undo: list[str] = []

    @property
    def settled(self) -> str | None:
        """``"committed"``, ``"abandoned"``, or None while the group is open."""
        return self._settled

    # ------------------------------------------------------------------ the block
    async def __aenter__(self) -> Group:
        if self._entered:
            raise GroupRefused(self.name, "a group is entered once")
        self._entered = True
        await self._mark("open", {"members": list(self.members)})
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._settled is not None:
            return False
        if exc is not None and not isinstance(exc, Exception):
            # GeneratorExit (a crash, an eviction, a quarantine): the run is not over, it will be
            # replayed to this very point. Reversing now would be an abandonment nobody decided
            # (and awaiting an effect while the coroutine is being closed is not possible).
            return False
        reason = "left the block without commit" if exc is None else f"{type(exc).__name__}: {exc}"
        abandoned = await self._abandon(reason)
        if exc is None:
            raise abandoned
        exc.add_note(abandoned.message)
        return False  # the original exception goes on; the reversal is journaled and noted on it

    # ------------------------------------------------------------------ members
    async def reversible(
        self,
        member: str,
        tool: str,
        args: Mapping[str, Any],
        *,
        undo: UndoFn,
        idempotency_key: str | None = None,
        mutating: bool | None = None,
        recovery: Recovery | str | None = None,
    ) -> Any:
        """Perform ``member`` now (a journaled ``ctx.tool`` call) and register its undo, built by
        ``undo(output)`` → ``(tool, args)`` or ``(tool, args, idempotency_key)``. Returns the
        output. A failed call registers nothing and is recorded in doubt or failed."""
        self._claim(member)
        try:
            out = await self._ctx.tool(
                tool, args, mutating=mutating, recovery=recovery, idempotency_key=idempotency_key
            )
        except EffectError as exc:
            (self._in_doubt if _in_doubt(exc) else self._failed).append(member)
            raise
        try:
            self._standing.append(_build_undo(member, undo, out))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            # It happened and nobody can say how to reverse it: leave it standing, on record.
            self._no_undo.append(member)
            raise GroupRefused(
                self.name,
                f"member {member!r}: cannot build its undo from the output: {type(exc).__name__}: {exc}",
            ) from exc
        return out

    def deferred(
        self,
        member: str,
        tool: str,
        args: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        mutating: bool | None = None,
        recovery: Recovery | str | None = None,
    ) -> None:
        """Hold ``member`` until ``commit``; it never runs if the group is abandoned."""
        self._claim(member)
        if not isinstance(tool, str) or not tool:
            raise GroupRefused(self.name, f"member {member!r}: a tool name is required")
        self._deferred.append(
            _Deferred(member, tool, dict(args), idempotency_key, mutating, recovery)
        )

    async def commit(
        self, invariants: Iterable[Invariant | tuple[str, bool]] = ()
    ) -> dict[str, Any]:
        """Check ``invariants``; all hold → journal the commit, run the deferred members (in
        declaration order) and return their outputs by member name. One fails → abandon and
        raise ``InvariantFailed``. After commit the group is gone: a failure does not unwind."""
        self._open_or_refuse("commit")
        checks = [
            inv if isinstance(inv, Invariant) else _invariant(self.name, inv) for inv in invariants
        ]
        failed = tuple(inv.name for inv in checks if not inv.holds)
        if failed:
            summary = await self._abandon_summary(
                f"invariant failed: {', '.join(failed)}",
                {"invariants": {inv.name: inv.holds for inv in checks}},
            )
            raise InvariantFailed(self.name, failed, **summary)
        await self._mark(
            "commit",
            {
                "invariants": {inv.name: inv.holds for inv in checks},
                "deferred": [d.member for d in self._deferred],
            },
        )
        self._settled = "committed"
        outputs: dict[str, Any] = {}
        for held in self._deferred:
            outputs[held.member] = await self._ctx.tool(
                held.tool,
                held.args,
                mutating=held.mutating,
                recovery=held.recovery,
                idempotency_key=held.idempotency_key,
            )
        return outputs

    async def abandon(self, reason: str = "abandoned by the agent") -> GroupAbandoned:
        """Abandon on purpose: reverse what stands, never run the deferred members. Returns the
        ``GroupAbandoned`` describing it (not raised: the agent chose this)."""
        self._open_or_refuse("abandon")
        return await self._abandon(reason)

    # ------------------------------------------------------------------ internals
    def _claim(self, member: str) -> None:
        self._open_or_refuse(f"member {member!r}")
        if member not in self.members:
            raise GroupRefused(
                self.name, f"member {member!r} was not declared (declared: {list(self.members)})"
            )
        if member in self._used:
            raise GroupRefused(self.name, f"member {member!r} was already used")
        self._used.add(member)

    def _open_or_refuse(self, what: str) -> None:
        if not self._entered:
            raise GroupRefused(
                self.name, f"{what}: use the group as `async with ctx.group(...) as g`"
            )
        if self._settled is not None:
            raise GroupRefused(self.name, f"{what}: the group is already {self._settled}")

    async def _abandon(self, reason: str) -> GroupAbandoned:
        return GroupAbandoned(self.name, reason, **(await self._abandon_summary(reason, {})))

    async def _abandon_summary(self, reason: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        """Journal the decision, then reverse what stands newest first; an undo that fails is
        recorded and the others still run (one stuck release must not keep the rest held)."""
        self._settled = "abandoned"
        to_reverse = [u.member for u in reversed(self._standing)]
        not_run = [d.member for d in self._deferred]
        await self._mark(
            "abandon",
            {
                "reason": reason,
                "reverse": to_reverse,
                "in_doubt": list(self._in_doubt),
                "failed": list(self._failed),
                "not_run": not_run,
                "left_standing": list(self._no_undo),
                **extra,
            },
        )
        done: list[str] = []
        undo_failed: dict[str, str] = {}
        for step in reversed(self._standing):
            try:
                await self._ctx.tool(step.tool, step.args, idempotency_key=step.idempotency_key)
            except EffectError as exc:
                undo_failed[step.member] = f"{exc.type}: {exc.message}"
            else:
                done.append(step.member)
        await self._mark("abandoned", {"reversed": done, "undo_failed": undo_failed})
        return {
            "reversed_": tuple(done),
            "in_doubt": tuple(self._in_doubt),
            "failed": tuple(self._failed),
            "not_run": tuple(not_run),
            "left_standing": tuple(self._no_undo),
            "undo_failed": undo_failed,
        }

    def _mark(self, event: str, detail: Mapping[str, Any]) -> Effect:
        # The decision is the request (so the witness covers it) and its recorded value.
        request = {"group": self.name, "event": event, **detail}
        return Effect("group", f"group:{self.name}", request, Op.OBSERVE, {"fn": lambda: request})


def _invariant(group: str, item: Any) -> Invariant:
    if not isinstance(item, tuple) or len(item) != 2:
        raise GroupRefused(group, f"an invariant is (name, bool) or Invariant, got {item!r}")
    try:
        return Invariant(item[0], item[1])
    except ValueError as exc:
        raise GroupRefused(group, str(exc)) from None


def _build_undo(member: str, undo: UndoFn, out: Any) -> _Undo:
    spec = undo(out)
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise TypeError(
            f"undo must return (tool, args) or (tool, args, idempotency_key), got {spec!r}"
        )
    tool, args = spec[0], spec[1]
    key = spec[2] if len(spec) == 3 else None
    if not isinstance(tool, str) or not tool:
        raise TypeError(f"undo tool must be a non-empty string, got {tool!r}")
    if not isinstance(args, Mapping):
        raise TypeError(f"undo args must be a mapping, got {type(args).__name__}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"undo idempotency_key must be a string, got {type(key).__name__}")
    return _Undo(member, tool, dict(args), key)


def _in_doubt(exc: EffectError) -> bool:
    """Whether a failed member may nonetheless have acted: an operator abandoned the call in
    doubt without saying what happened, or it failed transiently after its retries (a timeout
    does not tell whether the peer applied it). A non-retryable failure was refused."""
    return exc.type == "EffectAbandoned" or exc.retryable
