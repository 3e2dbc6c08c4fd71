"""The sink gate: may this exact JSON leave the run for this sink? Pure.

Every outbound effect (a tool call, a model call) passes ``check`` with the JSON it will send —
the bytes the performer is handed, after explicit wrappers are taken out — before it is
announced. The label of each scalar in that JSON is

    matched  ⊔  explicit

``matched``: the join of the labels of every recorded output of the run (and its input) the
scalar *matches* (``Matcher``): equal to one of its scalars, or sharing a fragment of at least
``MIN_FRAGMENT`` characters with one of its strings, or a number that its text mentions. This
is what stops laundering by unwrapping: an agent that takes the plain string out of an
untrusted model answer and sends it still sends bytes that match the answer. A scalar that
matches nothing is labelled ``unattributed`` — the engine passes the run's context label
(``labels.unattributed``: what the run has read, once anything untrusted is among it), so
re-chunked or re-encoded untrusted text stays untrusted. ``explicit``: the label of a
``Labeled`` wrapper around it (it can only add restriction).

A ``SinkDecl`` then decides:

- **egress ceiling**: the join of all scalars may not be more sensitive than ``ceiling``;
- a **mutating** sink with no protected fields refuses any untrusted scalar;
- a mutating sink with **protected fields** checks each named field independently — its trust,
  that its provenance names one of the required ``sources`` (positive evidence, which a
  transformed value cannot fake), its sensitivity — and lets the other fields through, so an
  untrusted memo may accompany a trusted recipient without gaining authority.

A ``Grant`` is a journaled release honoured at this sink: under its path, trust (and/or
sensitivity) is improved; provenance is kept. A grant for another sink is never passed here.

**Exact labels** (``exact_labels``): where the runtime moved the values itself — the arguments
of a call a model proposed in the agent loop — no matching is needed. Each argument scalar is
either a *verbatim copy* of a scalar of what the proposing turn could read (the run's input and
every result recorded before the turn), and then carries the join of the labels of the results
holding it — so a protected field's source rule (``tool://crm_lookup``) is met exactly when the
model copied the value from that tool's result — or it was *composed* by the model, and carries
the turn's label (the join of everything the turn could read) under the model's name alone,
which no source rule names. The call itself (path ``$``) carries the turn's trust: a mutating
sink without protected fields refuses any call an untrusted turn proposed, arguments or none.

Limits (docs/security.md): matching sees bytes, not meaning. In a run that has read nothing
untrusted, a value the agent *transforms* (re-spelled, re-encoded, summarised by its own code)
matches nothing and is labelled like a constant of the agent's code — trusted; once it has
read anything untrusted, such a value carries the run's context label instead. Required
``sources`` on protected fields are the defence that does not depend on matching.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

from runplane.core.jsonpaths import get, leaves, parse, under
from runplane.core.labels import BOTTOM, CONTEXT, join, join_all, sensitivity_rank
from runplane.wire import Label, Sensitivity, Trust

__all__ = [
    "MIN_FRAGMENT",
    "FieldRule",
    "Grant",
    "Matcher",
    "Reason",
    "Refusal",
    "SinkDecl",
    "Source",
    "check",
    "declared_sinks",
    "exact_labels",
    "improve",
    "judge",
    "label_scalars",
    "sinks",
]

# Shorter strings match only by equality: below this, shared fragments are coincidence
# ("the ", "2024") far more often than flow.
MIN_FRAGMENT: Final = 8
# Numbers this small carry too little information to say where they came from.
_MIN_NUMBER: Final = 10
_NUMBER: Final = re.compile(r"-?\d[\d,_]*(?:\.\d+)?")

F = TypeVar("F", bound=Callable[..., Any])


class Reason(StrEnum):
    """Why the gate refused (the ``reason`` label of the refusal metric)."""

    EGRESS = "egress"  # the payload is more sensitive than the sink's ceiling
    UNTRUSTED = "untrusted"  # an untrusted scalar to a mutating sink without protected fields
    FIELD_TRUST = "field_trust"  # a protected field is untrusted
    FIELD_SOURCE = "field_source"  # a protected field does not come from a required source
    FIELD_SENSITIVITY = "field_sensitivity"  # a protected field is too sensitive
    NOT_GRANTED = "not_granted"  # the deployment policy does not grant this sink
    BUDGET = "budget"  # the run's budget would be exceeded
    NOT_DELEGATED = "not_delegated"  # the delegation the run runs under excludes this sink
    DELEGATION_EXPIRED = "delegation_expired"  # ... or is past its validity
    # a ``Released`` that is not its journaled decision: re-pointed, forged, or hand-made
    RELEASE_MISMATCH = "release_mismatch"


@dataclass(frozen=True)
class FieldRule:
    """One protected field of a mutating sink: ``path`` (``$.recipient``); ``trusted``: its
    value must be trusted; ``sources``: its provenance must name one of these (``human:*``:
    any person, i.e. it must have been released by someone; ``policy:data:release``: released
    by a policy grant); ``max_sensitivity``: its sensitivity may not exceed this."""

    path: str
    trusted: bool = True
    sources: tuple[str, ...] = ()
    max_sensitivity: Sensitivity | None = None

    def __post_init__(self) -> None:
        parse(self.path)  # InvalidPath now, not at the first call
        object.__setattr__(self, "sources", tuple(self.sources))
        if self.max_sensitivity is not None:
            object.__setattr__(self, "max_sensitivity", Sensitivity(self.max_sensitivity))


@dataclass(frozen=True)
class SinkDecl:
    """What a sink accepts. ``sink`` is the effect's journaled name (``tool://payout``,
    ``model:openai/gpt-4o``)."""

    sink: str
    mutating: bool = True
    ceiling: Sensitivity | str = Sensitivity.SECRET  # a Sensitivity (or its name)
    protected: tuple[FieldRule, ...] = ()

    def __post_init__(self) -> None:
        if not self.sink:
            raise ValueError("a sink declaration needs the sink's name")
        object.__setattr__(self, "ceiling", Sensitivity(str(self.ceiling).upper()))
        object.__setattr__(self, "protected", tuple(self.protected))
        if self.protected and not self.mutating:
            raise ValueError(f"sink {self.sink!r}: protected fields need a mutating sink")


@dataclass(frozen=True)
class Source:
    """A recorded output of the run (or its input), with the label it was recorded under."""

    name: str
    label: Label
    value: Any


@dataclass(frozen=True)
class Grant:
    """A release honoured at this sink for everything under ``path``: trust raised to trusted
    when ``trust``, sensitivity lowered to ``sensitivity`` when set; ``by`` joins provenance."""

    path: str
    trust: bool
    sensitivity: Sensitivity | None
    by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """The gate's no: which sink, why, where in the payload, and a sentence for people."""

    sink: str
    reason: Reason
    path: str
    message: str


def improve(label: Label, grant: Grant) -> Label:
    """``label`` as ``grant`` releases it: the named dimensions improve, provenance stays."""
    return Label(
        trust=Trust.TRUSTED if grant.trust else label.trust,
        sensitivity=grant.sensitivity if grant.sensitivity is not None else label.sensitivity,
        provenance=tuple(sorted({*label.provenance, *grant.by})),
    )


class Matcher:
    """Labels scalars by the recorded outputs they match. Keep one per run and ``add`` each new
    output once: the index is inverted (scalar, fragment or number → the join of the labels of
    the outputs holding it), so matching costs lookups per fragment of the scalar, whatever the
    number of outputs indexed."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._index: dict[str, Label] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> None:
        keys: set[str] = set()
        for _, scalar in leaves(source.value):
            keys.update(_keys(scalar, mentioned=True))
        index, label = self._index, source.label
        for key in keys:
            held = index.get(key)
            index[key] = label if held is None or held == label else join(held, label)

    def label_of(self, scalar: Any, unmatched: Label = BOTTOM) -> Label:
        """The join of the labels of every source ``scalar`` matches (``unmatched`` for none)."""
        index = self._index
        found = {index[k] for k in _keys(scalar, mentioned=False) if k in index}
        return join_all(found) if found else unmatched


def _keys(scalar: Any, *, mentioned: bool) -> set[str]:
    """What ``scalar`` is found under: itself (type-tagged), its fragments, its magnitude, and
    — for an indexed output's text (``mentioned``) — every number the text mentions."""
    if isinstance(scalar, str):
        keys = {_key(scalar), *("g:" + g for g in _grams(scalar))}
        if mentioned:
            keys.update("n:" + n for n in _mentioned_numbers(scalar))
        return keys
    number = _number_key(scalar)
    return set() if number is None else {_key(scalar), "n:" + number}


def _key(scalar: Any) -> str:
    # Type-tagged, so the string "10000" and the number 10000 are different scalars (the
    # number is still found inside text by the "n:" keys).
    return f"{type(scalar).__name__}:{scalar}"


def _grams(text: str) -> set[str]:
    norm = " ".join(text.split()).lower()
    return {norm[i : i + MIN_FRAGMENT] for i in range(len(norm) - MIN_FRAGMENT + 1)}


def _informative(scalar: Any) -> bool:
    return (
        isinstance(scalar, int | float)
        and not isinstance(scalar, bool)
        and abs(scalar) >= _MIN_NUMBER
    )


def _number_key(scalar: Any) -> str | None:
    if not _informative(scalar):
        return None
    # The magnitude: negating an amount is too small a transform to lose where it came from.
    value = abs(float(scalar))
    return repr(int(value)) if value.is_integer() else repr(value)


def _mentioned_numbers(text: str) -> set[str]:
    out = set()
    for token in _NUMBER.findall(text):
        try:
            value = float(token.replace(",", "").replace("_", ""))
        except ValueError:
            continue
        key = _number_key(int(value) if value.is_integer() else value)
        if key is not None:
            out.add(key)
    return out


def check(
    decl: SinkDecl,
    payload: Any,
    matcher: Matcher,
    explicit: Mapping[str, Label] | None = None,
    grants: Sequence[Grant] = (),
    unattributed: Label = BOTTOM,
) -> Refusal | None:
    """The gate's verdict on sending ``payload`` to ``decl.sink``: None, or the first refusal
    (egress, then the mutating rules), naming the offending path."""
    labels = label_scalars(payload, matcher, explicit or {}, grants, unattributed)
    return judge(decl, payload, labels)


def judge(decl: SinkDecl, payload: Any, labels: Mapping[str, Label]) -> Refusal | None:
    """``check`` on labels already found (``label_scalars``), for a caller that keeps them."""
    whole = join_all(labels.values())
    ceiling = Sensitivity(decl.ceiling)  # normalised by the constructor; typed for callers
    if sensitivity_rank(whole.sensitivity) > sensitivity_rank(ceiling):
        path = max(labels, key=lambda p: sensitivity_rank(labels[p].sensitivity))
        return Refusal(
            decl.sink,
            Reason.EGRESS,
            path,
            f"{path} is {whole.sensitivity.lower()}; {decl.sink} accepts at most {ceiling.lower()}",
        )
    if not decl.mutating:
        return None
    if not decl.protected:
        for path, label in labels.items():
            if label.trust is Trust.UNTRUSTED:
                return Refusal(
                    decl.sink,
                    Reason.UNTRUSTED,
                    path,
                    f"{path} derives from untrusted {_origins(label)}; {decl.sink} is mutating",
                )
        return None
    for rule in decl.protected:
        refusal = _check_field(decl.sink, rule, payload, labels)
        if refusal is not None:
            return refusal
    return None


def label_scalars(
    payload: Any,
    matcher: Matcher,
    explicit: Mapping[str, Label],
    grants: Sequence[Grant],
    unattributed: Label = BOTTOM,
) -> dict[str, Label]:
    """The label of each scalar of ``payload`` by path: matched (``unattributed`` when it
    matches nothing) ⊔ explicit, improved by the grants honoured here."""
    out: dict[str, Label] = {}
    for path, scalar in leaves(payload):
        # An empty list or object carries no byte of anything read: it is the agent's own.
        label = matcher.label_of(scalar, BOTTOM if _empty(scalar) else unattributed)
        for where, extra in explicit.items():
            if under(path, where):
                label = join(label, extra)
        for grant in grants:
            if under(path, grant.path):
                label = improve(label, grant)
        out[path] = label
    return out


def exact_labels(
    payload: Any, sources: Iterable[Source], composed: Label, choice: Label
) -> dict[str, Label]:
    """The labels of a proposed call's arguments (``payload``) by path: a scalar equal to a
    scalar of one of ``sources`` (verbatim: the same string, or the same number; booleans,
    null and the empty string say nothing of where they came from) carries the join of those
    sources' labels, any other ``composed``; ``$`` (the call itself) also carries ``choice``."""
    index: dict[str, Label] = {}
    for source in sources:
        for key in {_verbatim(scalar) for _, scalar in leaves(source.value)} - {None}:
            assert key is not None
            held = index.get(key)
            index[key] = source.label if held is None else join(held, source.label)
    out: dict[str, Label] = {}
    for path, scalar in leaves(payload):
        key = _verbatim(scalar)
        if key is not None:
            out[path] = index.get(key, composed)
        else:
            out[path] = BOTTOM if _empty(scalar) else composed
    out["$"] = join(out.get("$", BOTTOM), choice)
    return out


def _verbatim(scalar: Any) -> str | None:
    """The key a scalar is copied under: a non-empty string as it is, a number by value."""
    if isinstance(scalar, str):
        return "s:" + scalar if scalar else None
    if isinstance(scalar, int | float) and not isinstance(scalar, bool):
        return "n:" + repr(float(scalar))
    return None


def _empty(scalar: Any) -> bool:
    return isinstance(scalar, Mapping | list | tuple) and not scalar


def _check_field(
    sink: str, rule: FieldRule, payload: Any, labels: Mapping[str, Label]
) -> Refusal | None:
    inside = [label for path, label in labels.items() if under(path, rule.path)]
    if not inside or get(payload, rule.path) is None:
        return None  # nothing is sent there
    label = join_all(inside)
    if rule.trusted and label.trust is Trust.UNTRUSTED:
        return Refusal(
            sink,
            Reason.FIELD_TRUST,
            rule.path,
            f"protected field {rule.path} derives from untrusted {_origins(label)}",
        )
    if rule.sources and not any(_names(s, label.provenance) for s in rule.sources):
        return Refusal(
            sink,
            Reason.FIELD_SOURCE,
            rule.path,
            f"protected field {rule.path} must come from {' or '.join(rule.sources)}; "
            f"it comes from {_origins(label) or 'the agent code alone'}",
        )
    if rule.max_sensitivity is not None and sensitivity_rank(label.sensitivity) > sensitivity_rank(
        rule.max_sensitivity
    ):
        return Refusal(
            sink,
            Reason.FIELD_SENSITIVITY,
            rule.path,
            f"protected field {rule.path} is {label.sensitivity.lower()}, "
            f"at most {rule.max_sensitivity.lower()} allowed",
        )
    return None


def _names(source: str, provenance: tuple[str, ...]) -> bool:
    """Whether ``provenance`` names ``source``; ``human:*`` (a trailing ``*``) is any
    ``human:…`` — e.g. "released by some person", whoever it was."""
    if source.endswith("*"):
        return any(p.startswith(source[:-1]) for p in provenance)
    return source in provenance


def _origins(label: Label) -> str:
    return ", ".join(
        "what the run has read" if p == CONTEXT else p
        for p in label.provenance
        if not p.startswith("agent/")
    )


def sinks(*decls: SinkDecl) -> Callable[[F], F]:
    """Declare an agent's sinks, above ``@agent``::

        @sinks(SinkDecl("tool://payout", protected=(FieldRule("$.recipient",
               sources=("tool://crm_lookup",)),)))
        @agent("payout", ...)
        async def payout(ctx, input): ...

    The gate judges every outbound call of every run; a declaration (the agent's, or the
    deployment policy's, which wins) says what one sink accepts. Without one, a sink is
    judged by the call's own ``mutating``, with no egress ceiling.
    """

    def attach(fn: F) -> F:
        fn.__runplane_sinks__ = {d.sink: d for d in decls}  # type: ignore[attr-defined]
        return fn

    return attach


def declared_sinks(fn: Any) -> Mapping[str, SinkDecl] | None:
    """The sinks ``@sinks`` declared on an agent function, or None when it declared none."""
    found = getattr(fn, "__runplane_sinks__", None)
    return found if isinstance(found, Mapping) else None
