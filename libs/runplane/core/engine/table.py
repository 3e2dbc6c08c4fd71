"""The family table as the engine's kernel reads it, filled once by ``registry`` at import.

Families import only the kernel, and the registry imports the families; so the kernel cannot
import the registry to learn what the rows say. The registry hands it over here instead, in
one ``install`` at import (``runplane.core.engine`` imports the registry before any run
exists): how each op's recorded value decodes, how a parked run waits again after a restore,
which effect families a new era reads back from the side-effect log, which waits a cancel
interrupts, which waits a timeout of their own bounds (a due Wake times them out), and each
family's own part of a run's snapshot (``Part``). The containers are filled in place, so a
reader holds them from its own import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Generic, Protocol, TypeVar, cast

from runplane.core.effect import Effect, Op
from runplane.core.engine.vocab import WaitKind
from runplane.wire import ParkKind, SessionSnapshot

__all__ = [
    "BOUNDED",
    "CANCEL_HOOKS",
    "CROSS_ERA",
    "DECODE",
    "DUE",
    "INTERRUPTIBLE",
    "LOGGED",
    "PARTS",
    "REWAIT",
    "Decoder",
    "Part",
    "install",
]

# The agent's value for an op's recorded value (``decode.serve``).
Decoder = Callable[[Effect, Any], Any]

DECODE: Final[dict[Op, Decoder]] = {}
REWAIT: Final[dict[ParkKind, WaitKind]] = {}
# Effect families served from the side-effect log at a fresh slot of a new era (``eras``) ...
CROSS_ERA: Final[set[str]] = set()
# ... and every family whose records the log keeps (some serve them in their own order).
LOGGED: Final[set[str]] = set()
INTERRUPTIBLE: Final[set[WaitKind]] = set()
BOUNDED: Final[set[WaitKind]] = set()
# What a wait of a family that waits for an instant (``Run.wait_until``) does when it comes:
# the timers row delivers the Wake, the family's hook says what follows (``doubt``: the probe).
DUE: Final[dict[WaitKind, Callable[[Any, Any], Any]]] = {}
# What a family does when its run accepts a cancel (a commission cancels its children) →
# attrs for the CANCEL_REQUESTED record.
CANCEL_HOOKS: Final[list[Callable[[Any], Mapping[str, str]]]] = []

T = TypeVar("T")


class Holder(Protocol):
    """What holds family parts: a run (``Run.parts``, one immutable value per part name)."""

    parts: dict[str, Any]


@dataclass(frozen=True)
class Part(Generic[T]):
    """A family's own part of a run's state, declared in its registry row.

    The run holds it as one immutable value in ``Run.parts[name]`` (``default`` until the
    family first sets it) and the family *replaces* the value when it changes, so capturing a
    snapshot or taking an undo mark copies the dict shallowly and nothing else. The snapshot
    carries it as ``encode``'s text in ``SessionSnapshot.parts[name]`` (absent at the
    default); ``decode`` reads it back.

    ``read_old`` / ``write_old``: the SessionSnapshot fields the value lived in before
    ``parts`` existed (a part new since then has none). A snapshot without the part — an
    older writer's, or the value at its default — is read from them; and they are still
    written, so an older executor that reads a newer snapshot (a rolling upgrade) finds the
    value where it looks. Both must give the default for the fields' own defaults."""

    name: str
    default: T
    encode: Callable[[T], str]  # only ever handed a value other than the default
    decode: Callable[[str], T]
    read_old: Callable[[SessionSnapshot], T] | None = None
    write_old: Callable[[T], Mapping[str, Any]] | None = None

    def of(self, run: Holder) -> T:
        """The run's value of this part."""
        return cast("T", run.parts.get(self.name, self.default))

    def put(self, run: Holder, value: T) -> None:
        """Replace the run's value of this part (never change the value in place)."""
        run.parts[self.name] = value

    def read(self, snapshot: SessionSnapshot) -> T:
        """The value ``snapshot`` holds: its ``parts`` first, then the older fields."""
        text = snapshot.parts.get(self.name)
        if text is not None:
            return self.decode(text)
        return self.default if self.read_old is None else self.read_old(snapshot)

    def written(self, value: T, parts: dict[str, str], old: dict[str, Any]) -> None:
        """Add ``value`` as a snapshot carries it to ``parts`` (SessionSnapshot.parts) and
        to ``old`` (the older fields, by name); nothing at the default."""
        if value != self.default:
            parts[self.name] = self.encode(value)
            if self.write_old is not None:
                old.update(self.write_old(value))

    def into(self, snapshot: SessionSnapshot, value: T) -> SessionSnapshot:
        """``snapshot`` holding ``value`` for this part (the older fields too)."""
        parts = {k: v for k, v in snapshot.parts.items() if k != self.name}
        old: dict[str, Any] = {}
        if value == self.default and self.write_old is not None:
            old.update(self.write_old(value))  # the older fields back at their defaults
        self.written(value, parts, old)
        return replace(snapshot, parts=parts, **old)


# Every family's part, by name (a name has one owner, asserted by the registry).
PARTS: Final[dict[str, Part[Any]]] = {}


def parts_of(snapshot: SessionSnapshot) -> dict[str, Any]:
    """Every part's value in ``snapshot`` away from its default (what ``Run.parts`` starts
    from on a restore)."""
    values = ((name, part.read(snapshot), part.default) for name, part in PARTS.items())
    return {name: value for name, value, default in values if value != default}


def snapshot_parts(values: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``values`` (a run's parts) as a snapshot carries them: ``SessionSnapshot.parts`` and
    the older fields, by name."""
    parts: dict[str, str] = {}
    old: dict[str, Any] = {}
    if not values:
        return parts, old  # every part at its default (most steps of most runs)
    for name, part in PARTS.items():
        part.written(values.get(name, part.default), parts, old)
    return parts, old


def install(
    *,
    decode: Mapping[Op, Decoder],
    rewait: Mapping[ParkKind, WaitKind],
    cross_era: set[str],
    logged: set[str],
    interruptible: set[WaitKind],
    bounded: set[WaitKind],
    parts: Mapping[str, Part[Any]],
    on_cancel: Sequence[Callable[[Any], Mapping[str, str]]] = (),
    on_due: Mapping[WaitKind, Callable[[Any, Any], Any]] | None = None,
) -> None:
    """Fill the table (once: the registry's rows are final)."""
    if DECODE or REWAIT or LOGGED or PARTS:
        raise RuntimeError("the family table is installed once, by the registry")
    DECODE.update(decode)
    REWAIT.update(rewait)
    CROSS_ERA.update(cross_era)
    LOGGED.update(logged)
    INTERRUPTIBLE.update(interruptible)
    BOUNDED.update(bounded)
    PARTS.update(parts)
    CANCEL_HOOKS.extend(on_cancel)
    DUE.update(on_due or {})
