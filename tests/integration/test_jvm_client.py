"""A JVM client runplane did not write, built with Maven (Apache Avro + kafka-clients), following
schemas/README.md only: it emits requests to admission and reads the answers, and consumes
``audit`` — records written with today's schema and with an earlier one (schemas/history/).
Skipped where Maven or a JDK is missing (``make test`` installs both: scripts/install-system-deps.sh).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Producer
from test_admission import CAPS, running

from runplane.config import Settings
from runplane.kafka.clients import producer_config
from runplane.wire import (
    AuditRecord,
    JournalKind,
    Label,
    Sensitivity,
    Trust,
    Verdict,
    codegen,
    encode,
)
from runplane.wire._history import EARLIER_SCHEMAS
from services.admission.serve import build
from services.admission.settings import AdmissionSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
JVM = ROOT / "tests" / "jvm"
SCHEMAS = ROOT / "schemas"


@pytest.fixture(scope="module")
def java_client() -> list[str]:
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("Maven and a JDK are needed (scripts/install-system-deps.sh installs them)")
    built = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "compile",
            "dependency:build-classpath",
            "-Dmdep.outputFile=target/classpath.txt",
        ],
        cwd=JVM,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    classpath = (JVM / "target" / "classpath.txt").read_text().strip()
    return ["java", "-cp", f"{JVM / 'target' / 'classes'}:{classpath}", "dev.runplane.tests.Client"]


def _java(client: list[str], mode: str, settings: Settings, n: int) -> list[list[str]]:
    done = subprocess.run(
        [*client, mode, settings.bootstrap_servers, settings.topic_prefix, str(SCHEMAS), str(n)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]


def test_a_java_emitter_is_admitted_answered_duplicate_and_refused_when_undecodable(
    settings: Settings, java_client: list[str]
) -> None:
    with running(build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)):
        replies = _java(java_client, "emit", settings, 5)
    by_key: dict[str, list[list[str]]] = {}
    for _, key, *rest in replies:
        by_key.setdefault(key, []).append(rest)
    assert len(replies) == 11
    for i in range(5):
        (first_outcome, run_id, *_), (second_outcome, again, *_) = by_key[f"jvm-{i}"]
        assert (first_outcome, second_outcome) == ("ADMITTED", "DUPLICATE")
        assert run_id == again and run_id.startswith("r-"), by_key
    [(outcome, run_id, _, reason)] = by_key["jvm-garbage"]
    assert (outcome, run_id) == ("REFUSED", "null")
    assert reason == "undecodable: unknown schema fingerprint 0102030405060708"


def _earlier_audit_records(session_id: str) -> list[bytes]:
    """One AuditRecord per earlier schema in the history, as that runplane wrote it (seq 0..)."""
    schemas = [
        (fp, json.loads(text))
        for fp, text in sorted(EARLIER_SCHEMAS.items())
        if json.loads(text)["name"] == "AuditRecord"
    ]
    assert len(schemas) >= 2, "no earlier AuditRecord schema in schemas/history/"
    out = []
    for seq, (fp, schema) in enumerate(schemas):
        datum = {
            "schema_version": 1,
            "session_id": session_id,
            "seq": seq,
            "era": 0,
            "kind": "EFFECT_RECORDED",
            "call_seq": None,
            "family": None,
            "name": None,
            "stamp_ms": 1,
            "label": {"trust": "TRUSTED", "sensitivity": "INTERNAL", "provenance": []},
            "cost": None,
            "attrs": {},
            "hash": "ab" * 32,
            "verdict": "VERIFIED",
            "broken_at_seq": None,
            "reason": None,
            "capability": "refund",
            "case_id": None,
            "verified_ms": 2,
        }
        buf = io.BytesIO()
        fields = {f["name"]: datum[f["name"]] for f in schema["fields"]}
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), fields)
        out.append(b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue())
    return out


def test_a_java_audit_consumer_reads_every_historical_and_todays_record(
    settings: Settings, java_client: list[str]
) -> None:
    assert codegen.stale(codegen.outputs()) == []  # what the Java client parses is current
    label = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=())
    earlier = _earlier_audit_records("r-jvm")
    today = [
        encode(
            AuditRecord(
                session_id="r-jvm",
                seq=seq,
                era=0,
                kind=JournalKind.RUN_COMPLETED
                if seq == len(earlier) + 1
                else JournalKind.EFFECT_RECORDED,
                stamp_ms=seq,
                label=label,
                hash="cd" * 32,
                verdict=Verdict.VERIFIED,
                verified_ms=seq,
            )
        )
        for seq in range(len(earlier), len(earlier) + 2)
    ]
    values = earlier + today
    producer = Producer(producer_config(settings))
    for value in values:
        producer.produce(settings.topic("audit"), key=b"r-jvm", value=value)
    assert producer.flush(10) == 0
    rows = _java(java_client, "audit", settings, len(values))
    kinds = ["EFFECT_RECORDED"] * (len(values) - 1) + ["RUN_COMPLETED"]
    assert [(r[3], r[4], r[5], r[6], r[7]) for r in rows] == [
        ("r-jvm", str(seq), kind, "VERIFIED", "1") for seq, kind in enumerate(kinds)
    ]
