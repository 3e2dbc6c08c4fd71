"""One verdict per run, whoever reads it: every forgery kind, every reader, the same answer.

A forgery is what an attacker with write access to ``journal`` or ``results`` can leave on
the topics: an edited record, a reordered pair, an old record re-sent (mid-run or after the
end), a wrong hash, a broken link, a changed body, a well-chained record after the run's end.
Each is judged by every reader the platform has, from the same topic contents:

- ``runplane.core.verify_chain`` (the reference),
- ``runplane journal verify`` (``verify_exit_code``) and ``GET /runs/{id}/verify`` (HTTP),
- the journal service's handler (the ``audit`` stream it publishes, and its quarantine),
- the run index (``GET /runs/{id}``, ``runplane runs show``: the summary fold over ``audit``,
  fed at least once — every batch twice here, as a re-read after a crash would),
- an outside consumer decoding ``audit`` bytes with ``examples/audit_consumer.py`` (no
  runplane import) by the contract in ``schemas/README.md``, also fed every record twice.

All must say BROKEN at the same seq with the same reason. The unforged run verifies
everywhere (the test can fail both ways).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_audit_consumer import load_example

from runplane.cli.journal import EXIT_BROKEN, verify_exit_code
from runplane.config import Settings
from runplane.core.chain import Draft, body_digest, seal
from runplane.core.verify import verify_chain
from runplane.journal.index import RunFilter
from runplane.journal.summary import RunSummary, apply, summarize
from runplane.runs.read import RunHistory
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.signing.admission import SigningKey
from runplane.signing.journal import Keyring, Signer
from runplane.signing.journal import unsigned as _unsigned
from runplane.wire import (
    AuditRecord,
    CaseRecord,
    JournalKind,
    JournalRecord,
    ResultEntry,
    Verdict,
    encode,
    serde_for,
)
from services.journal.api import build_api
from services.journal.decide import (
    AuditOut,
    JournalIn,
    PartitionState,
    QuarantineOut,
    ResultIn,
    on_journal,
    on_result,
)
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.unit

SID = "r-forged"
Bodies = dict[tuple[int, int], ResultEntry | None]
Topics = tuple[list[JournalRecord], Bodies]
# (forge the topics, expected fault, expected seq) — sample_run(SID, 3) is seqs 0..7:
# 0 admitted, 1/2 announce/record call 0, 3/4 call 1, 5/6 call 2, 7 completed.


def _edit(records: list[JournalRecord], bodies: Bodies) -> Topics:
    # The cost of call 1 rewritten in place, the hash left as it was.
    records[4] = dataclasses.replace(records[4], stamp_ms=records[4].stamp_ms + 1)
    return records, bodies


def _reorder(records: list[JournalRecord], bodies: Bodies) -> Topics:
    records[3], records[4] = records[4], records[3]
    return records, bodies


def _resend_mid_run(records: list[JournalRecord], bodies: Bodies) -> Topics:
    return [*records[:5], records[2], *records[5:]], bodies


def _resend_after_end(records: list[JournalRecord], bodies: Bodies) -> Topics:
    return [*records, records[2]], bodies


def _wrong_hash(records: list[JournalRecord], bodies: Bodies) -> Topics:
    records[5] = dataclasses.replace(records[5], hash="f" * 64)
    return records, bodies


def _bad_link(records: list[JournalRecord], bodies: Bodies) -> Topics:
    # Validly hashed, linked to a record that is not its predecessor.
    records[5] = seal(records[5], records[3].hash)
    return records, bodies


def _changed_body(records: list[JournalRecord], bodies: Bodies) -> Topics:
    entry = bodies[(0, 1)]
    assert entry is not None
    bodies[(0, 1)] = dataclasses.replace(entry, value_json=json.dumps({"n": 999}))
    return records, bodies


def _changed_body_and_digest(records: list[JournalRecord], bodies: Bodies) -> Topics:
    entry = bodies[(0, 1)]
    assert entry is not None
    value = {"n": 999}
    bodies[(0, 1)] = dataclasses.replace(
        entry, value_json=json.dumps(value), body_digest=body_digest(True, value, None)
    )
    return records, bodies


def _append_after_end(records: list[JournalRecord], bodies: Bodies) -> Topics:
    # A well-chained record after RUN_COMPLETED: seq, link and hash all correct.
    end = records[-1]
    extra = Draft(SID, end.seq + 1, 0, JournalKind.RUN_PARKED, end.stamp_ms + 1)
    return [*records, seal(extra, end.hash)], bodies


def _forged_end_then_more(records: list[JournalRecord], bodies: Bodies) -> Topics:
    # A second, well-chained ending after the first one.
    end = records[-1]
    extra = Draft(SID, end.seq + 1, 0, JournalKind.RUN_FAILED, end.stamp_ms + 1)
    return [*records, seal(extra, end.hash)], bodies


FORGERIES: dict[str, tuple[Callable[[list[JournalRecord], Bodies], Topics], str, int]] = {
    "edit": (_edit, "bad_hash", 4),
    "reorder": (_reorder, "gap", 3),
    "resend_mid_run": (_resend_mid_run, "reorder", 5),
    "resend_after_end": (_resend_after_end, "after_end", 8),
    "wrong_hash": (_wrong_hash, "bad_hash", 5),
    "bad_link": (_bad_link, "bad_link", 5),
    "changed_body": (_changed_body, "body_digest_mismatch", 4),
    "changed_body_and_digest": (_changed_body_and_digest, "body_digest_mismatch", 4),
    "append_after_end": (_append_after_end, "after_end", 8),
    "second_end": (_forged_end_then_more, "after_end", 8),
}

Judgement = tuple[bool, int | None, str | None]  # (verified, broken_at_seq, reason)


Unsigned = tuple[str | None, ...] | None


def _core(records: list[JournalRecord], bodies: Bodies, unsigned: Unsigned) -> Judgement:
    v = verify_chain(records, bodies, unsigned=unsigned)
    return (True, None, None) if v.ok else (False, v.bad_seq, f"{v.fault}: {v.detail}")


def _cli(records: list[JournalRecord], bodies: Bodies, unsigned: Unsigned) -> Judgement:
    history = RunHistory(SID, 0, tuple(records), dict(bodies), unsigned=unsigned)
    code, data = verify_exit_code(history)
    assert (code == EXIT_BROKEN) == (not data["verified"])
    return data["verified"], data["broken_at_seq"], data["reason"]


def _audit_stream(
    records: list[JournalRecord], bodies: Bodies, unsigned: Unsigned
) -> list[AuditRecord]:
    """What the journal service publishes on ``audit``; asserts one quarantine per break."""
    state = PartitionState(0, body_grace_ms=1_000)
    out: list[AuditOut | QuarantineOut] = []
    for i, (key, entry) in enumerate(bodies.items()):
        out += on_result(state, ResultIn((SID, *key), entry, 0, i), 0)
    for i, rec in enumerate(records):
        out += on_journal(state, JournalIn(rec, 0, i, None if unsigned is None else unsigned[i]), 0)
    audits = [o.record for o in out if isinstance(o, AuditOut)]
    assert len(audits) == len(records) and state.held_count() == 0
    quarantines = [o for o in out if isinstance(o, QuarantineOut)]
    first_break = next((a for a in audits if a.verdict is Verdict.BROKEN), None)
    if first_break is None:
        assert quarantines == []
    else:
        assert [q.broken_at_seq for q in quarantines] == [first_break.broken_at_seq]
    return audits


def _from_audit(audits: list[AuditRecord]) -> Judgement:
    first = next((a for a in audits if a.verdict is Verdict.BROKEN), None)
    return (True, None, None) if first is None else (False, first.broken_at_seq, first.reason)


def _index(audits: list[AuditRecord]) -> RunSummary:
    """The Redis index's fold (``RunIndex._apply_run`` applies ``summary.apply`` per batch in
    topic order), with every batch delivered twice."""
    summary = RunSummary(SID)
    for batch in (audits[:3], audits[:3], audits[3:], audits):
        for a in batch:
            summary = apply(summary, a)
    return summary


def _of_summary(s: RunSummary) -> Judgement:
    broken = s.verdict is Verdict.BROKEN
    return (not broken, s.broken_at_seq if broken else None, s.reason if broken else None)


def _outside(audits: list[AuditRecord]) -> Judgement:
    ex = load_example()
    decoder = ex.Decoder(ex.SCHEMAS, None)
    verdicts = ex.RunVerdicts()
    for a in audits + audits:  # at-least-once: everything again
        run = verdicts.add(decoder.decode(encode(a)))
    broken = run["verdict"] == "BROKEN"
    return (not broken, run["broken_at_seq"], run["reason"])


class _Index:
    def __init__(self, summary: RunSummary) -> None:
        self.summary = summary

    def get(self, run_id: str) -> RunSummary | None:
        return self.summary if run_id == SID else None

    def list(self, f: RunFilter) -> list[RunSummary]:
        return [self.summary]


class _Reader:
    def __init__(self, history: RunHistory) -> None:
        self.run = history

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory:
        return self.run

    def case(self, case_id: str) -> CaseRecord | None:
        return None


@pytest.fixture(scope="module")
def http() -> Iterator[Callable[[RunHistory, RunSummary], dict[str, Any]]]:
    """``GET /runs/{id}/verify`` and ``GET /runs/{id}`` over the real app (one server; the
    test swaps the run it serves)."""
    principals = Principals.from_data(
        [{"name": "ada", "token_sha256": token_digest("t"), "roles": ["auditor"]}]
    )
    reader = _Reader(RunHistory(SID, 0, ()))
    index = _Index(RunSummary(SID))
    app = build_api(lambda: index, reader, principals)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": "Bearer t"},
            timeout=20,
        ) as client,
    ):

        def ask(history: RunHistory, summary: RunSummary) -> dict[str, Any]:
            reader.run, index.summary = history, summary
            verify = client.get(f"/runs/{SID}/verify")
            run = client.get(f"/runs/{SID}")
            assert verify.status_code == 200 and run.status_code == 200, verify.text + run.text
            return {"verify": verify.json(), "run": run.json()}

        yield ask
    stop.set()


def _judge_all(
    records: list[JournalRecord],
    bodies: Bodies,
    http: Callable[[RunHistory, RunSummary], dict[str, Any]],
    unsigned: Unsigned = None,
) -> dict[str, Judgement]:
    audits = _audit_stream(records, bodies, unsigned)
    indexed = _index(audits)
    answers = http(RunHistory(SID, 0, tuple(records), dict(bodies), unsigned=unsigned), indexed)
    v, run = answers["verify"], answers["run"]
    run_broken = run["verdict"] == "BROKEN"
    assert (v["service_verdict"] == "BROKEN") == run_broken
    return {
        "core verify_chain": _core(records, bodies, unsigned),
        "cli journal verify": _cli(records, bodies, unsigned),
        "http /verify": (v["verified"], v["broken_at_seq"], v["reason"]),
        "audit topic": _from_audit(audits),
        "run index": _of_summary(indexed),
        "http /runs/RUN": (
            not run_broken,
            run["broken_at_seq"] if run_broken else None,
            run["reason"] if run_broken else None,
        ),
        "runs show": _of_summary(summarize(SID, audits)),
        "outside consumer": _outside(audits),
    }


def test_the_unforged_run_verifies_for_every_reader(http: Any) -> None:
    records, results = sample_run(SID, 3)
    judged = _judge_all(records, dict(results), http)
    assert set(judged.values()) == {(True, None, None)}, judged


@pytest.mark.parametrize("kind", sorted(FORGERIES))
def test_every_reader_judges_a_forgery_alike(kind: str, http: Any) -> None:
    forge, fault, seq = FORGERIES[kind]
    records, results = sample_run(SID, 3)
    forged, bodies = forge(list(records), dict(results))
    judged = _judge_all(forged, bodies, http)
    reference = judged["core verify_chain"]
    assert reference[:2] == (False, seq), reference
    assert reference[2] is not None and reference[2].startswith(f"{fault}: "), reference
    disagree = {reader: j for reader, j in judged.items() if j != reference}
    assert not disagree, f"{kind}: reference {reference}, but {disagree}"


# -- writer signatures (runplane.signing.journal): a well-chained extension by a foreign writer ----------

SERDE = serde_for(Settings())


def _key_pair() -> tuple[Signer, Keyring]:
    key = Ed25519PrivateKey.generate()
    return Signer(SigningKey("writer-1", key)), Keyring({"writer-1": key.public_key()})


def _signed(records: list[JournalRecord], signer: Signer) -> list[tuple[bytes, bytes | None]]:
    out = []
    for r in records:
        value = SERDE.encode("journal", r)
        out.append((value, signer.header(value)[1]))
    return out


def _extension(records: list[JournalRecord]) -> list[JournalRecord]:
    # The run has not ended yet (its RUN_COMPLETED not written): the attacker ends it.
    last = records[-2]
    forged = Draft(SID, last.seq + 1, 0, JournalKind.RUN_COMPLETED, last.stamp_ms + 1)
    return [*records[:-1], seal(forged, last.hash)]


def _foreign_key(
    records: list[JournalRecord], wire: list[tuple[bytes, bytes | None]]
) -> list[tuple[bytes, bytes | None]]:
    attacker = Signer(SigningKey.generate("writer-1"))  # claims the writer's key id
    value = SERDE.encode("journal", records[-1])
    return [*wire[:-1], (value, attacker.header(value)[1])]


def _no_signature(
    records: list[JournalRecord], wire: list[tuple[bytes, bytes | None]]
) -> list[tuple[bytes, bytes | None]]:
    return [*wire[:-1], (SERDE.encode("journal", records[-1]), None)]


def _replayed_signature(
    records: list[JournalRecord], wire: list[tuple[bytes, bytes | None]]
) -> list[tuple[bytes, bytes | None]]:
    # A genuine signature, copied from the record it was made for.
    return [*wire[:-1], (SERDE.encode("journal", records[-1]), wire[-2][1])]


SIGNED_FORGERIES = {
    "foreign_key": _foreign_key,
    "no_signature": _no_signature,
    "replayed_signature": _replayed_signature,
}


def test_a_signed_run_verifies_for_every_reader(http: Any) -> None:
    signer, keyring = _key_pair()
    records, results = sample_run(SID, 3)
    unsigned = _unsigned(keyring, _signed(records, signer))
    judged = _judge_all(records, dict(results), http, unsigned)
    assert set(judged.values()) == {(True, None, None)}, judged


@pytest.mark.parametrize("kind", sorted(SIGNED_FORGERIES))
def test_a_foreign_writers_extension_is_broken_for_every_reader(kind: str, http: Any) -> None:
    signer, keyring = _key_pair()
    records, results = sample_run(SID, 3)
    forged = _extension(records)
    wire = SIGNED_FORGERIES[kind](forged, _signed(forged, signer))
    unsigned = _unsigned(keyring, wire)
    # Without the keyring the extension is a perfect chain: only the signature tells.
    assert verify_chain(forged, results).ok
    judged = _judge_all(forged, dict(results), http, unsigned)
    reference = judged["core verify_chain"]
    assert reference[:2] == (False, 7), reference
    assert reference[2] is not None and reference[2].startswith("bad_signature: "), reference
    disagree = {reader: j for reader, j in judged.items() if j != reference}
    assert not disagree, f"{kind}: reference {reference}, but {disagree}"
