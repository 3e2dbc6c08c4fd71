"""Labels: trust, sensitivity and provenance, carried by every payload. Pure.

    join(a, b)            trust to the worse, sensitivity to the higher, provenance accumulates
    at_source(...)        the label an effect's result carries where it enters the run

``join`` is a semilattice join: associative, commutative, idempotent, with ``BOTTOM``
(trusted, public, no provenance) as its identity — so the label of a value built from many
results does not depend on the order they were combined in, on first run or on replay.

Where a label is applied: at the source, by the effect that produced the value (docs/design.md,
"Invariants"). A tool's result names ``tool://<name>``, a generation's
``model:<provider>/<model>``; model output and signals come from outside the platform's
trust boundary, so they start untrusted. The engine journals the label with the result
(ResultEntry and the chain record), and a label a provider supplies for its own result is
joined with the source label, never replacing it.

Inside agent code values are plain Python objects, so the label of a value is found two
ways (``runplane.core.gate``): explicitly, when the agent hands a ``Labeled`` wrapper to an
effect, and by matching the exact JSON an effect is about to send against the run's recorded
outputs — so unwrapping a value does not launder its label. Bytes that match nothing (a
constant, or a value the agent's code transformed past recognition) take ``unattributed`` of
the run's context label — the join of everything the run has taken in: the agent's own while
that is all trusted, what the run has read once anything untrusted is among it. ``flows_to``
is the lattice order the gate checks against (docs/security.md, "The label model").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from runplane.wire import Label, Sensitivity, Trust

__all__ = [
    "BOTTOM",
    "CONTEXT",
    "UNTRUSTED_FAMILIES",
    "Labeled",
    "Wrapper",
    "at_source",
    "flows_to",
    "join",
    "join_all",
    "sensitivity_rank",
    "unattributed",
]

T = TypeVar("T")

# Worst last: the join takes the later of the two in each order.
_TRUST: Final = (Trust.TRUSTED, Trust.UNTRUSTED)
_SENSITIVITY: Final = (
    Sensitivity.PUBLIC,
    Sensitivity.INTERNAL,
    Sensitivity.CONFIDENTIAL,
    Sensitivity.SECRET,
)
# Families whose results originate outside the platform's trust boundary.
UNTRUSTED_FAMILIES: Final = frozenset({"generation", "signal", "update"})

BOTTOM: Final = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.PUBLIC, provenance=())
# The origin an unattributed value names: the run's context, not any one source. Never a
# source a protected field's rule can require, so it is no positive evidence of anything.
CONTEXT: Final = "context"


def join(a: Label, b: Label) -> Label:
    """The least label at least as restrictive as both."""
    # Labels are canonical (sorted, unique provenance), so equal sides and the identity need
    # no new Label (validating one is the cost of a join).
    if a == b or b == BOTTOM:
        return a
    if a == BOTTOM:
        return b
    return Label(
        trust=max(a.trust, b.trust, key=_TRUST.index),
        sensitivity=max(a.sensitivity, b.sensitivity, key=_SENSITIVITY.index),
        provenance=tuple(sorted({*a.provenance, *b.provenance})),
    )


def join_all(labels: Iterable[Label]) -> Label:
    """The join of any number of labels (``BOTTOM`` for none)."""
    out = BOTTOM
    for label in labels:
        out = join(out, label)  # join(BOTTOM, x) is x itself: no Label is built for one label
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


def unattributed(context: Label) -> Label:
    """The label of bytes that match no recorded output, in a run whose context label (the
    join of every label it has taken in) is ``context``: the agent's own (``BOTTOM``) while
    the run has read nothing untrusted — then the agent's code is steered by trusted data
    alone; else the context's trust and sensitivity, origin ``CONTEXT`` — code that has read
    untrusted text may be re-chunking it, so nothing it computes is its own any more."""
    if context.trust is Trust.TRUSTED:
        return BOTTOM
    return Label(trust=context.trust, sensitivity=context.sensitivity, provenance=(CONTEXT,))


def sensitivity_rank(s: Sensitivity) -> int:
    """0 (public) … 3 (secret): the order egress ceilings compare in."""
    return _SENSITIVITY.index(s)


def flows_to(a: Label, b: Label) -> bool:
    """``a`` ⊑ ``b``: ``b`` is at least as restrictive in trust and sensitivity and names every
    origin of ``a`` (``join(a, b) == b``)."""
    return join(a, b) == b


class Wrapper:
    """Base of the wrappers an agent may hand to an effect in place of a value (``Labeled``,
    ``releases.Released``): the effect sends ``.value`` and the gate reads the wrapper."""

    __slots__ = ()
    value: Any


@dataclass(frozen=True)
class Labeled(Wrapper, Generic[T]):
    """A value with its label, for agent code that wants to carry one explicitly.

    Handing a ``Labeled`` to an effect (anywhere in ``ctx.tool``'s arguments or a prompt)
    sends the inner value and tells the gate its label; the gate joins it with what matching
    finds, so an explicit label can only add restriction, never remove it. ``map`` and
    ``combine`` keep the label (joined) across the agent's own computation.
    """

    value: T
    label: Label

    def map(self, fn: Callable[[T], Any]) -> Labeled[Any]:
        return Labeled(fn(self.value), self.label)

    def combine(self, other: Labeled[Any], fn: Callable[[T, Any], Any]) -> Labeled[Any]:
        return Labeled(fn(self.value, other.value), join(self.label, other.label))
