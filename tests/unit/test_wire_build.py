"""The compiled from_dict builders against the reference builder: same records, same errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.wire import JournalRecord, Record, from_dict, record_types, to_dict
from runplane.wire._base import _build_reference
from runplane.wire.strategies import any_record

pytestmark = pytest.mark.unit

_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["TRUSTED", "RUN_ADMITTED", "RUNNING", "", "ab" * 32]),
    st.lists(st.text(max_size=4), max_size=3),
    st.lists(st.text(max_size=4), max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    st.just({"trust": "TRUSTED", "sensitivity": "INTERNAL", "provenance": ["a"]}),
    st.just({"trust": "NOPE"}),
)


def _outcome(cls: type[Record], data: Any, build: Any) -> tuple[str, Any]:
    try:
        return "ok", build(cls, data)
    except Exception as exc:  # the point is to compare which error, if any
        return "error", (type(exc).__name__, str(exc))


@settings(max_examples=600, deadline=None)
@given(any_record())
def test_compiled_builders_rebuild_every_record_as_the_reference_does(record: Record) -> None:
    data = to_dict(record)
    assert from_dict(type(record), data) == _build_reference(type(record), data, "") == record


@settings(max_examples=1500, deadline=None)
@given(any_record(), st.data())
def test_compiled_builders_refuse_what_the_reference_refuses_with_the_same_message(
    record: Record, data: st.DataObject
) -> None:
    cls = type(record)
    plain = to_dict(record)
    names = sorted(plain)
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["replace", "drop", "add"]))
        if action == "replace":
            plain[data.draw(st.sampled_from(names))] = data.draw(_JUNK)
        elif action == "drop":
            plain.pop(data.draw(st.sampled_from(names)), None)
        else:
            plain[data.draw(st.text(max_size=6))] = data.draw(_JUNK)
    compiled = _outcome(cls, plain, lambda c, d: from_dict(c, d))
    reference = _outcome(cls, plain, lambda c, d: _build_reference(c, d, ""))
    assert compiled == reference


@pytest.mark.parametrize("bad", [None, [], "x", 3])
def test_a_non_object_is_refused_alike(bad: Any) -> None:
    assert _outcome(JournalRecord, bad, lambda c, d: from_dict(c, d)) == _outcome(
        JournalRecord, bad, lambda c, d: _build_reference(c, d, "")
    )


@pytest.mark.parametrize("name", sorted(record_types()))
def test_an_empty_object_gets_the_same_answer_for_every_type(name: str) -> None:
    cls = record_types()[name]
    # Required fields missing: the constructor's TypeError, reported with the same text.
    compiled = _outcome(cls, {}, lambda c, d: from_dict(c, d))
    assert compiled == _outcome(cls, {}, lambda c, d: _build_reference(c, d, ""))
    if compiled[0] == "error":
        assert compiled[1][0] == "SchemaError"
