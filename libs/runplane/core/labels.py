"""Labels: trust, sensitivity and provenance, carried by every payload. Pure.

    join(a, b)            trust to the worse, sensitivity to the higher, provenance accumulates
    at_source(...)        the label an effect's result carries where it enters the run

``join`` is a semilattice join: associative, commutative, idempotent, with ``BOTTOM``
(trusted, public, no provenance) as its identity — so the label of a value built from many
results does not depend on the order they were combined in, on first run or on replay.

Where a label is applied: at the source, by the effect that produced the value (DESIGN.md,
"The rest of the surface"). A tool's result names ``tool://<name>``, a generation's
``model:<provider>/<model>``; model output and signals come from outside the platform's
trust boundary, so they start untrusted. The engine journals the label with the result
(ResultEntry and the chain record), and a label a provider supplies for its own result is
joined with the source label, never replacing it.

Not here yet: the sink gate (refusing a mutating tool call whose arguments carry an
untrusted label) needs per-value labels inside agent code; values in an agent are plain
Python objects, so there is nothing yet that says which argument came from which result.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from runplane.wire import Label, Sensitivity, Trust

__all__ = ["BOTTOM", "UNTRUSTED_FAMILIES", "at_source", "join", "join_all"]

# Worst last: the join takes the later of the two in each order.
_TRUST: Final = (Trust.TRUSTED, Trust.UNTRUSTED)
_SENSITIVITY: Final = (
    Sensitivity.PUBLIC,
    Sensitivity.INTERNAL,
    Sensitivity.CONFIDENTIAL,
    Sensitivity.SECRET,
)
# Families whose results originate outside the platform's trust boundary.
UNTRUSTED_FAMILIES: Final = frozenset({"generation", "signal"})

BOTTOM: Final = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.PUBLIC, provenance=())


def join(a: Label, b: Label) -> Label:
    """The least label at least as restrictive as both."""
    return Label(
        trust=max(a.trust, b.trust, key=_TRUST.index),
        sensitivity=max(a.sensitivity, b.sensitivity, key=_SENSITIVITY.index),
        provenance=tuple(sorted({*a.provenance, *b.provenance})),
    )


def join_all(labels: Iterable[Label]) -> Label:
    """The join of any number of labels (``BOTTOM`` for none)."""
    out = BOTTOM
    for label in labels:
        out = join(out, label)
    return out


def at_source(family: str, name: str, capability: str) -> Label:
    """The label of a result where it enters the run: internal, origin ``name`` (the
    effect's journaled name: ``tool://…``, ``model:…/…``, …) within ``agent/<capability>``;
    untrusted for model output and signals."""
    trust = Trust.UNTRUSTED if family in UNTRUSTED_FAMILIES else Trust.TRUSTED
    return Label(
        trust=trust,
        sensitivity=Sensitivity.INTERNAL,
        provenance=tuple(sorted({f"agent/{capability}", name})),
    )
