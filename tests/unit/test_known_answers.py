"""Known answers: the derivations every in-flight run and every stored chain depend on, pinned.

Each expected value below was computed once (issue 26, item 8) and is written here literally;
nothing in this file recomputes it with the code under test. A change that moves any of them
— the random-seed derivation, the canonical JSON encoding, a witness, a body digest or a
record's hash — fails here, although every other test (comparing the code with itself) would
still pass. Such a change quarantines every run in flight that draws random values, or breaks
every stored chain: it needs a new version of the rule (``…/v2`` domain, chain version), not
a new expected value.
"""

from __future__ import annotations

import pytest

from runplane.core.canonical import canonical_bytes
from runplane.core.chain import (
    Draft,
    body_digest,
    default_label,
    record_hash,
    request_witness,
    run_admitted,
    seal,
)
from runplane.core.determinism import derive_randint, derive_random, session_seed
from runplane.wire import Cost, ErrorInfo, JournalKind

pytestmark = pytest.mark.unit

SEED_RUN_1 = "44e3e7ef60884c2ee7d19adefdd9f71d14babb1ccaaf887ecfaa54a41192f3c9"


# -- determinism tier 1: the seed and the draws ----------------------------------------------


def test_the_session_seed_is_the_pinned_digest() -> None:
    assert session_seed("run-1") == SEED_RUN_1
    # Non-ASCII ids are hashed as UTF-8.
    assert session_seed("é/ü") == "a88b823d80f8824cda8a2b5cbce576d17eaee2ef427770d6e373a493d1bd07b2"


def test_random_draws_at_each_position_are_the_pinned_values() -> None:
    assert [derive_random(SEED_RUN_1, i) for i in range(3)] == [
        0.0645435742260464,
        0.2810456265315593,
        0.21046294991331083,
    ]
    assert [derive_randint(SEED_RUN_1, i, 1, 6) for i in range(5)] == [1, 5, 1, 5, 5]
    assert derive_randint(SEED_RUN_1, 7, -(10**18), 10**18) == -32000504343694826


# -- the canonical encoding -------------------------------------------------------------------

VALUE = {
    "b": [1, 2.5, -0.0, 1e21, True, None],
    "a": 'é\n\u0001"\\',
    "big": 2**70,
    "z": {"y": 1e-7, "x": "\U0001f600"},
}


def test_the_canonical_bytes_of_a_value_are_the_pinned_text() -> None:
    # Keys sorted, minimal escapes (short \n, \u00xx lowercase), UTF-8 as itself, integers
    # exact, floats as ECMAScript writes them (-0 -> 0, 1e+21, 1e-7).
    assert canonical_bytes(VALUE) == (
        b'{"a":"\xc3\xa9\\n\\u0001\\"\\\\","b":[1,2.5,0,1e+21,true,null],'
        b'"big":1180591620717411303424,"z":{"x":"\xf0\x9f\x98\x80","y":1e-7}}'
    )


def test_a_request_witness_and_body_digests_are_the_pinned_digests() -> None:
    assert request_witness(VALUE) == (
        "e16d3412f729befe64bf8a9e45b6df3c39aba12f46fd0fbe09fc3057d4d8d623"
    )
    assert body_digest(True, {"n": 1}, None) == (
        "51d1360cd8223803f6417a352f4a80f94576e9dd6653115431fcec5707f3ae27"
    )
    failed = ErrorInfo(type="Boom", message="m", retryable=True)
    assert body_digest(False, None, failed) == (
        "5f5aa54905fde5756774e1042d744bcff49028f0d70fd98420fbcd18a168672b"
    )


# -- a record's hash ----------------------------------------------------------------------------


def test_a_records_hash_is_the_pinned_digest() -> None:
    draft = Draft(
        "run-1",
        1,
        0,
        JournalKind.EFFECT_RECORDED,
        1_700_000_000_000,
        call_seq=0,
        family="tool",
        name="tool://x",
        request_witness="a" * 64,
        body_digest="51d1360cd8223803f6417a352f4a80f94576e9dd6653115431fcec5707f3ae27",
        label=default_label(["tool://x"]),
        cost=Cost(tokens_in=10, tokens_out=5, units=0.5),
        attrs={"k": "v"},
    )
    record = seal(draft, "b" * 64)
    expected = "8274a4ac813593bad5bb8c7cf012f5980ac8b15e383ff4fc07da554e5b4de07a"
    assert record.hash == expected
    assert record_hash(record) == expected


def test_seq_0_of_a_run_is_the_pinned_record() -> None:
    admitted = run_admitted(
        "run-1",
        capability="refund",
        admission_key="k-1",
        tenant="default",
        initiator="ada",
        input_json='{"x": 1}',
        now_ms=1_700_000_000_000,
    )
    assert admitted.request_witness == (
        "5041bf1f713df204784353e82f6a4a535931cb64f1f4b4a5aeaffcb720918b22"
    )
    assert admitted.hash == "590e27c15cafa45c9b8e5b59d89bc758bb6e8b5f14a7383b61c8e652f2e89386"
