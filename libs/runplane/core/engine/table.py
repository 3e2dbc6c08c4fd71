"""The family table as the engine's kernel reads it, filled once by ``registry`` at import.

Families import only the kernel, and the registry imports the families; so the kernel cannot
import the registry to learn what the rows say. The registry hands it over here instead, in
one ``install`` at import (``runplane.core.engine`` imports the registry before any run
exists): how each op's recorded value decodes, how a parked run waits again after a restore,
which effect families a new era reads back from the side-effect log, which waits a cancel
interrupts, and which waits a timeout of their own bounds (a due Wake times them out). The containers are filled in place, so a reader holds them from its own import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from runplane.core.effect import Effect, Op
from runplane.core.engine.vocab import WaitKind
from runplane.wire import ParkKind

__all__ = [
    "BOUNDED",
    "CROSS_ERA",
    "DECODE",
    "INTERRUPTIBLE",
    "LOGGED",
    "REWAIT",
    "Decoder",
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


def install(
    *,
    decode: Mapping[Op, Decoder],
    rewait: Mapping[ParkKind, WaitKind],
    cross_era: set[str],
    logged: set[str],
    interruptible: set[WaitKind],
    bounded: set[WaitKind],
) -> None:
    """Fill the table (once: the registry's rows are final)."""
    if DECODE or REWAIT or LOGGED:
        raise RuntimeError("the family table is installed once, by the registry")
    DECODE.update(decode)
    REWAIT.update(rewait)
    CROSS_ERA.update(cross_era)
    LOGGED.update(logged)
    INTERRUPTIBLE.update(interruptible)
    BOUNDED.update(bounded)
