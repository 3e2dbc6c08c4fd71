"""The fast canonical JSON path (the json module's C encoder on plain values) against the
reference implementation of the rules: same text for every value, same errors otherwise."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import OrderedDict
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runplane.core.canonical import (
    _c_encode,
    _plain,
    _repr_is_canonical,
    canonical_bytes,
    canonical_json,
    canonical_json_reference,
    encode_str,
    format_float,
)
from runplane.core.chain import record_canonical_bytes, record_hash
from runplane.wire import (
    Cost,
    JournalKind,
    JournalRecord,
    Label,
    Record,
    Sensitivity,
    Trust,
    canonical_encoder,
    to_dict,
)
from runplane.wire.strategies import any_record, records

pytestmark = pytest.mark.unit

# Every code point class that matters: ASCII, the escaped controls, DEL and C1 controls,
# non-ASCII letters, the BMP edge, astral characters, and lone surrogates (refused in bytes).
_TEXT = st.text(
    st.one_of(
        st.characters(min_codepoint=0, max_codepoint=0x7F),
        st.characters(min_codepoint=0x80, max_codepoint=0x9F),
        st.characters(),
        st.sampled_from(
            [
                '"',
                "\\",
                "\b",
                "\f",
                "\n",
                "\r",
                "\t",
                "\x00",
                "\x1f",
                "\u2028",
                "\ufeff",
                "\U0001f600",
            ]
        ),
    ),
    max_size=12,
)
_INTS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, -1, 2**53, 2**63 - 1, -(2**63), 2**64]),
)
_FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            0.0,
            -0.0,
            1e-4,
            9.999999999999999e-05,
            1e-7,
            1e15 + 0.5,
            1e16,
            1e21,
            2.0,
            0.1,
            1e-5,
            5e-324,
        ]
    ),
)
_LEAF = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXT)


def _json_values(keys: st.SearchStrategy[Any] = _TEXT) -> st.SearchStrategy[Any]:
    return st.recursive(
        _LEAF,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.lists(inner, max_size=5).map(tuple),
            st.dictionaries(keys, inner, max_size=5),
        ),
        max_leaves=30,
    )


def _outcome(fn: Callable[[Any], object], value: Any) -> tuple[str, object]:
    try:
        return "ok", fn(value)
    except Exception as exc:  # the point is to compare which error, if any
        return "error", type(exc).__name__


@settings(max_examples=1500, deadline=None)
@given(_json_values())
@example({"b": 1, "a": [True, None, "é\x01\u2028"]})
@example({"a": 2.0, "b": 1e21, "c": 1e-7, "d": -0.0, "e": 0.1})
@example(["\ud800"])
@example({"n": 10**5000})
def test_fast_path_equals_the_reference(value: Any) -> None:
    assert _outcome(canonical_json, value) == _outcome(canonical_json_reference, value)
    assert _outcome(canonical_bytes, value) == _outcome(
        lambda v: canonical_json_reference(v).encode("utf-8"), value
    )


@settings(max_examples=1000, deadline=None)
@given(_json_values())
def test_the_c_encoder_alone_equals_the_reference_on_plain_values(value: Any) -> None:
    # The claim the fast path rests on, tested directly: whenever _plain admits a value the C
    # encoder's text is the reference's (the test above would pass with _plain always False).
    if not _plain(value, 0):
        return
    try:
        expected = canonical_json_reference(value)
    except ValueError:  # an int past the digit limit: both refuse, the fast path falls back
        return
    assert _c_encode is not None
    assert "".join(_c_encode(value, 0)) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_LEAF, st.dictionaries(_TEXT, _LEAF, max_size=4)), max_size=8))
def test_plain_values_are_common_enough_to_exercise_the_fast_path(value: Any) -> None:
    # Floats aside, these are plain: the fast path is really taken in the comparisons above.
    has_bad_float = any(
        (isinstance(x, float) and not _repr_is_canonical(x))
        or (
            isinstance(x, dict)
            and any(isinstance(y, float) and not _repr_is_canonical(y) for y in x.values())
        )
        for x in value
    )
    assert _plain(value, 0) is not has_bad_float


@settings(max_examples=2000, deadline=None)
@given(_FLOATS)
def test_floats_admitted_to_the_fast_path_are_written_as_ecmascript_does(value: float) -> None:
    if _repr_is_canonical(value):
        assert json.dumps(value) == repr(value) == format_float(value)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a"},
        {True: 1},
        {None: 1},
        {1.5: 1},
        OrderedDict(b=1, a=2),
        MappingProxyType({"b": 1, "a": 2}),
        {"a": {1, 2}},
        {"a": b"x"},
        [float("nan")],
        [float("inf")],
        {"x": 1.0},
        [1e16],
        [1e-5],
        [-0.0],
    ],
    ids=repr,
)
def test_values_the_c_encoder_would_write_differently_take_the_reference(value: Any) -> None:
    assert not _plain(value, 0)
    assert _outcome(canonical_json, value) == _outcome(canonical_json_reference, value)


class _Str(str):
    pass


class _Int(int):
    pass


class _List(list[Any]):
    def __iter__(self) -> Any:  # iteration differs from the storage the C encoder reads
        return iter(["overridden"])


class _Dict(dict[str, Any]):
    def items(self) -> Any:
        return [("overridden", 1)]


@pytest.mark.parametrize(
    "value", [{_Str("k"): 1}, [_Int(5)], _List([1, 2]), _Dict(a=1), {"a": _List([3])}], ids=repr
)
def test_subclasses_take_the_reference(value: Any) -> None:
    assert not _plain(value, 0)
    assert canonical_json(value) == canonical_json_reference(value)


def test_deep_values_take_the_reference() -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    assert not _plain(deep, 0)
    assert canonical_json(deep) == canonical_json_reference(deep)
    very_deep: Any = 1
    for _ in range(sys.getrecursionlimit() + 10):
        very_deep = {"a": very_deep}
    with pytest.raises(RecursionError):
        canonical_json(very_deep)


def test_big_integers_beyond_the_digit_limit_fail_as_the_reference_does() -> None:
    huge = 10 ** (sys.get_int_max_str_digits() + 1) if sys.get_int_max_str_digits() else None
    if huge is None:
        pytest.skip("no int digit limit on this interpreter")
    assert _plain([huge], 0)
    with pytest.raises(ValueError):
        canonical_json_reference([huge])
    with pytest.raises(ValueError):
        canonical_json([huge])


def test_repr_rule_boundaries() -> None:
    assert _repr_is_canonical(0.0001) and not _repr_is_canonical(math.nextafter(0.0001, 0))
    assert _repr_is_canonical(4503599627370495.5) and not _repr_is_canonical(2.0**53)
    assert not _repr_is_canonical(float("inf")) and not _repr_is_canonical(float("nan"))


# ---------------------------------------------------------------- compiled record encoders
def _reference_record_text(record: Record, exclude: frozenset[str]) -> str:
    body = to_dict(record)
    for name in exclude:
        del body[name]
    return canonical_json_reference(body)


@settings(max_examples=600, deadline=None)
@given(any_record())
def test_compiled_record_encoders_equal_the_reference_of_to_dict(record: Record) -> None:
    # A bytes field (DeadLetter) has no canonical form: both refuse it with TypeError.
    def compiled(r: Record) -> str:
        return canonical_encoder(type(r), encode_str=encode_str, encode_float=format_float)(r)

    assert _outcome(compiled, record) == _outcome(
        lambda r: _reference_record_text(r, frozenset()), record
    )


@settings(max_examples=600, deadline=None)
@given(records(JournalRecord))
def test_record_hash_covers_the_reference_canonical_bytes(record: JournalRecord) -> None:
    expected = _reference_record_text(record, frozenset({"hash"})).encode("utf-8")
    assert record_canonical_bytes(record) == expected
    assert (
        record_hash(record)
        == hashlib.sha256(bytes.fromhex(record.prev_hash) + expected).hexdigest()
    )


def test_a_record_with_a_cost_and_odd_strings_hashes_as_the_reference_says() -> None:
    record = JournalRecord(
        session_id="s-é\x00\u2028",
        seq=3,
        era=1,
        kind=JournalKind.EFFECT_RECORDED,
        call_seq=2,
        family="generation",
        name="model:x",
        request_witness="ab" * 32,
        body_digest=None,
        stamp_ms=-(2**63),
        label=Label(trust=Trust.UNTRUSTED, sensitivity=Sensitivity.SECRET, provenance=("a", "b\n")),
        cost=Cost(tokens_in=2**63 - 1, tokens_out=0, units=1e21),
        attrs={"z": "1", "a": '"q"', "é": ""},
        prev_hash="cd" * 32,
        hash="ef" * 32,
    )
    assert (
        record_canonical_bytes(record)
        == _reference_record_text(record, frozenset({"hash"})).encode()
    )
    assert b'"units":1e+21' in record_canonical_bytes(record)


def test_a_lone_surrogate_is_refused_when_hashing_as_canonical_bytes_refuses_it() -> None:
    record = JournalRecord(
        session_id="s-1",
        seq=0,
        era=0,
        kind=JournalKind.RUN_ADMITTED,
        stamp_ms=0,
        label=Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=()),
        prev_hash="00" * 32,
        hash="00" * 32,
    )
    object.__setattr__(record, "attrs", {"k": "\ud800"})  # bypassing validation on purpose
    with pytest.raises(UnicodeEncodeError):
        record_canonical_bytes(record)
