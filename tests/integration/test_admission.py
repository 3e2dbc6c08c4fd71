"""Admission on the real broker: one key, at most one run, ever — through crashes and scale-out.

The invariant checked everywhere, with read_committed readers: for every admission key,
claims == RunAdmitted records == StartRun records == 1, all naming the same run, and every
other request for the key was answered DUPLICATE with that run.
"""

from __future__ import annotations

import collections
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from fastavro import schemaless_writer
from test_processor import read_all

from runplane.config import Settings, example_tools_config
from runplane.fakes import free_port
from runplane.kafka.clients import producer_config
from runplane.kafka.processor import Processor
from runplane.runs.client import Client
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    DeadLetter,
    JournalKind,
    JournalRecord,
    RunStatus,
    RunStatusUpdate,
    StartRun,
    parsed_schema,
    schema_fingerprint,
    serde_for,
)
from services.admission.decide import CapabilitySpec
from services.admission.serve import build, serve
from services.admission.settings import AdmissionSettings
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

SERDE = serde_for(Settings())
RUNPLANE = Path(sys.executable).with_name("runplane")
REFUND_INPUT = '{"invoice_id": "inv-1"}'
CAPS = {
    "refund": CapabilitySpec(
        {
            "type": "object",
            "properties": {"invoice_id": {"type": "string"}},
            "required": ["invoice_id"],
        }
    )
}


def request(key: str, tenant: str = "acme") -> bytes:
    return SERDE.encode(
        "admission",
        AdmissionRequest(
            admission_key=key,
            capability="refund",
            input_json=REFUND_INPUT,
            tenant=tenant,
            initiator="alice",
        ),
    )


def unvalidated_request(key: str, tenant: str) -> bytes:
    """What a foreign producer that skips our validation could send."""
    buf = io.BytesIO()
    fields = {
        "admission_key": key,
        "capability": "refund",
        "input_json": REFUND_INPUT,
        "correlation_keys": {},
        "tenant": tenant,
        "initiator": "mallory",
        "requested_ms": 0,
    }
    schemaless_writer(buf, parsed_schema(AdmissionRequest), fields)
    return b"\xc3\x01" + schema_fingerprint(AdmissionRequest) + buf.getvalue()


def produce_all(
    settings: Settings,
    items: list[tuple[str, bytes]],
    pause_every: int = 0,
    hold: threading.Event | None = None,
) -> None:
    """Produce ``items``, pausing after every ``pause_every``; with ``hold``, the last quarter
    waits until it is set (so a kill in between lands while the burst is still under way)."""
    producer = Producer(producer_config(settings))
    held = len(items) - len(items) // 4 if hold is not None else len(items)
    for i, (key, value) in enumerate(items):
        if i == held and hold is not None:
            producer.flush(10)
            assert hold.wait(120), "the held part of the burst was never released"
        producer.produce(settings.topic("admission"), key=key.encode(), value=value)
        if pause_every and i % pause_every == pause_every - 1:
            producer.flush(10)
            time.sleep(0.05)
    assert producer.flush(30) == 0


def emit_interleaved(settings: Settings, keys: list[str], copies: int, **kw: Any) -> None:
    """Every key ``copies`` times, from two producers at once, copies interleaved."""
    rounds = [[(k, request(k)) for k in keys] for _ in range(copies)]
    halves = [list(itertools.chain(*rounds[0::2])), list(itertools.chain(*rounds[1::2]))]
    threads = [threading.Thread(target=produce_all, args=(settings, h), kwargs=kw) for h in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def committed_replies(settings: Settings) -> list[AdmissionReply]:
    return [r for _, r in read_all(settings, "admission.replies") if isinstance(r, AdmissionReply)]


def check_one_run_per_key(settings: Settings, keys: list[str], requests_per_key: int) -> None:
    claims: dict[str, list[AdmissionClaim]] = collections.defaultdict(list)
    for _, v in read_all(settings, "admission.claims"):
        assert isinstance(v, AdmissionClaim)
        claims[v.admission_key].append(v)  # rows are per (tenant, key); one tenant here
    starts = collections.defaultdict(list)
    for _, v in read_all(settings, "runs.inbox"):
        assert isinstance(v, StartRun)
        starts[v.admission_key].append(v)
    admitted = collections.defaultdict(list)
    for _, v in read_all(settings, "journal"):
        assert isinstance(v, JournalRecord) and v.kind == JournalKind.RUN_ADMITTED
        admitted[v.attrs["admission_key"]].append(v)
    replies = collections.defaultdict(list)
    for r in committed_replies(settings):
        replies[r.admission_key].append(r)

    assert set(claims) == set(starts) == set(admitted) == set(replies) == set(keys)
    for key in keys:
        assert len(claims[key]) == 1, (key, claims[key])  # no status updates in these tests
        assert len(starts[key]) == 1, (key, starts[key])
        assert len(admitted[key]) == 1, (key, admitted[key])
        run_id = claims[key][0].run_id
        assert starts[key][0].session_id == admitted[key][0].session_id == run_id
        assert starts[key][0].admitted_hash == admitted[key][0].hash
        outcomes = collections.Counter(r.outcome for r in replies[key])
        assert outcomes == {
            AdmissionOutcome.ADMITTED: 1,
            AdmissionOutcome.DUPLICATE: requests_per_key - 1,
        }, (key, outcomes)
        assert {r.run_id for r in replies[key]} == {run_id}


@contextmanager
def running(processor: Processor) -> Iterator[Processor]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            processor.run(stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield processor
    finally:
        stop.set()
        thread.join(30)
        assert not errors, errors


def serve_admission(settings: Settings, instance: str, port: int = 0) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_INSTANCE_ID": instance,
        "RUNPLANE_ADMISSION_PORT": str(port),
        "RUNPLANE_AGENT_MODULES": "examples.refund",
        # The refund's billing tools: admission refuses a capability the executor cannot run.
        "RUNPLANE_TOOLS_CONFIG": example_tools_config() or "",
        "RUNPLANE_ADMISSION_BATCH_MAX": "50",
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
    }
    return subprocess.Popen(
        [str(RUNPLANE), "serve", "admission"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err.decode(errors="replace")


def test_thousand_keys_five_times_from_two_producers(settings: Settings) -> None:
    keys = [f"order-{i}" for i in range(1000)]
    emit_interleaved(settings, keys, copies=5)
    with running(
        build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)
    ) as proc:
        wait_for(
            lambda: len(committed_replies(settings)) >= 5000, what="5000 replies", timeout_s=90
        )
        assert proc.state.size("claims") == 1000
    check_one_run_per_key(settings, keys, requests_per_key=5)
    dup = [r for r in committed_replies(settings) if r.outcome == AdmissionOutcome.DUPLICATE]
    assert len(dup) == 4000 and all(r.status == RunStatus.ADMITTED for r in dup)


def test_sigkill_during_a_burst_never_makes_two_runs(settings: Settings) -> None:
    keys = [f"burst-{i}" for i in range(600)]
    first = serve_admission(settings, "adm-0")
    # The last quarter of the burst is held back until the kill: a faster admission must not
    # finish the whole burst between the first replies and the SIGKILL.
    rest = threading.Event()
    producer = threading.Thread(
        target=emit_interleaved,
        args=(settings, keys, 2),
        kwargs={"pause_every": 50, "hold": rest},
    )
    producer.start()
    try:
        wait_for(
            lambda: len(committed_replies(settings)) >= 100, what="the first replies", timeout_s=60
        )
    finally:
        code, err = finish(first, signal.SIGKILL)
        rest.set()
    assert code == -signal.SIGKILL, err[-2000:]
    producer.join(120)
    assert len(committed_replies(settings)) < 1200  # killed mid-burst, not after it

    second = serve_admission(settings, "adm-0")  # same transactional.id: fences the dead one
    try:
        wait_for(
            lambda: len(committed_replies(settings)) >= 1200, what="1200 replies", timeout_s=90
        )
    finally:
        code, err = finish(second)
    assert code == 0, err[-2000:]
    check_one_run_per_key(settings, keys, requests_per_key=2)


def test_two_instances_concurrently_never_make_two_runs(settings: Settings) -> None:
    keys = [f"scale-{i}" for i in range(600)]
    a = serve_admission(settings, "adm-a")
    b = None
    producer = threading.Thread(
        target=emit_interleaved, args=(settings, keys, 2), kwargs={"pause_every": 100}
    )
    producer.start()
    try:
        wait_for(
            lambda: len(committed_replies(settings)) >= 50, what="the first replies", timeout_s=60
        )
        port = free_port()
        b = serve_admission(settings, "adm-b", port)  # joins mid-burst: a rebalance under load
        # Until b answers it may still be importing, with no SIGTERM handler yet.
        wait_for(
            lambda: _status(f"http://127.0.0.1:{port}/healthz") == 200, what="b up", timeout_s=120
        )
        producer.join(120)
        wait_for(
            lambda: len(committed_replies(settings)) >= 1200, what="1200 replies", timeout_s=90
        )
    finally:
        results = [finish(p) for p in (a, b) if p is not None]
    for code, err in results:
        assert code == 0, err[-2000:]
    check_one_run_per_key(settings, keys, requests_per_key=2)


def test_each_refusal_reason_claims_nothing(settings: Settings) -> None:
    raw = [
        ("bad-tenant", unvalidated_request("bad-tenant", tenant="ac/me")),
        ("x" * 300, unvalidated_request("x" * 300, tenant="acme")),
        ("garbage", b"\x00\x01 not a record"),
    ]
    produce_all(settings, raw)
    with (
        running(build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)),
        Client(settings) as client,
    ):
        unknown = client.admit(
            "nope", "r-unknown", {"invoice_id": "i"}, tenant="acme", initiator="alice"
        )
        invalid = client.admit(
            "refund", "r-invalid", {"amount": 3}, tenant="acme", initiator="alice"
        )
        wait_for(lambda: len(committed_replies(settings)) >= 5, what="the raw refusals")
        wait_for(lambda: len(read_all(settings, "deadletter")) >= 1, what="the dead letter")
    assert unknown.outcome == AdmissionOutcome.REFUSED and "unknown capability 'nope'" in (
        unknown.reason or ""
    )
    assert invalid.outcome == AdmissionOutcome.REFUSED and "invoice_id" in (invalid.reason or "")
    by_key = {r.admission_key: r for r in committed_replies(settings)}
    assert by_key["bad-tenant"].outcome == AdmissionOutcome.REFUSED
    assert "tenant" in (by_key["bad-tenant"].reason or "")
    assert by_key["x" * 300].outcome == AdmissionOutcome.REFUSED
    assert "256" in (by_key["x" * 300].reason or "")
    # Undecodable, yet answered (its emitter may not read deadletter) — and dead-lettered.
    assert by_key["garbage"].outcome == AdmissionOutcome.REFUSED
    assert (by_key["garbage"].reason or "").startswith("undecodable: ")
    letters = [v for _, v in read_all(settings, "deadletter")]
    assert len(letters) == 1 and isinstance(letters[0], DeadLetter)
    assert letters[0].key == b"garbage"
    assert all(r.run_id is None for r in by_key.values())
    for topic in ("admission.claims", "runs.inbox", "journal"):
        assert read_all(settings, topic) == [], topic


def test_duplicate_of_a_run_awaiting_a_human_names_the_task(settings: Settings) -> None:
    with (
        running(build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)),
        Client(settings) as client,
    ):
        first = client.admit(
            "refund",
            "dispute-17",
            {"invoice_id": "i"},
            tenant="acme",
            correlation={"dispute": "D-17"},
            initiator="alice",
        )
        assert first.outcome == AdmissionOutcome.ADMITTED and first.run_id is not None
        assert first.case_id is not None and first.case_id.startswith("c-")
        update = RunStatusUpdate(
            admission_key="dispute-17",
            run_id=first.run_id,
            status=RunStatus.AWAITING_HUMAN,
            task_id="task-9",
            updated_ms=time.time_ns() // 1_000_000,
            tenant="acme",  # as the executor writes it: claims are per (tenant, key)
        )
        produce_all(settings, [("dispute-17", SERDE.encode("admission", update))])
        again = client.admit(
            "refund", "dispute-17", {"invoice_id": "i"}, tenant="acme", initiator="alice"
        )
    assert again.outcome == AdmissionOutcome.DUPLICATE
    assert again.run_id == first.run_id and again.case_id == first.case_id
    assert again.status == RunStatus.AWAITING_HUMAN and again.task_id == "task-9"
    claims = [v for _, v in read_all(settings, "admission.claims")]
    assert isinstance(claims[-1], AdmissionClaim) and claims[-1].status == RunStatus.AWAITING_HUMAN


def test_serve_answers_healthz_metrics_and_the_emit_cli(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    monkeypatch.setenv("RUNPLANE_ADMISSION_PORT", str(port))
    monkeypatch.setenv("RUNPLANE_AGENT_MODULES", "examples.refund")
    monkeypatch.setenv("RUNPLANE_TOOLS_CONFIG", example_tools_config() or "")
    # As deployed: signatures required; `runplane emit` signs with the key file it is given.
    key_file = str(tmp_path / "cli.key")
    keygen = subprocess.run(
        [
            str(RUNPLANE),
            "emitters",
            "new-key",
            "--name",
            "cli",
            "--tenant",
            "default",
            "--out",
            key_file,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert keygen.returncode == 0, keygen.stderr
    entry = keygen.stdout.split("RUNPLANE_ADMISSION_EMITTERS_FILE):\n", 1)[1].split("\n\n")[0]
    (tmp_path / "emitters.yaml").write_text(entry + "\n")
    monkeypatch.setenv("RUNPLANE_ADMISSION_EMITTERS_FILE", str(tmp_path / "emitters.yaml"))
    monkeypatch.delenv("RUNPLANE_ADMISSION_ALLOW_UNSIGNED", raising=False)
    monkeypatch.delenv("RUNPLANE_EMITTER_KEY", raising=False)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(settings, stop), daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_INITIATOR": "alice",  # emit never guesses the initiator from the OS user
        "RUNPLANE_EMITTER_KEY_FILE": key_file,
    }

    def emit(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(RUNPLANE), "emit", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    admitted = "runplane_admission_admitted_total"
    refused = 'runplane_admission_refused_total{reason="unknown_capability"}'
    try:
        wait_for(lambda: _status(f"{base}/healthz") == 200, what="/healthz 200", timeout_s=60)
        # Counters are per process and other tests in it count too: compare deltas.
        before = _samples(httpx.get(f"{base}/metrics").text)
        ok = emit(
            "refund", "--key", "cli-1", "--input", '{"invoice_id": "i-1"}', "--case", "order=O-1"
        )
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("admitted r-") and "(case c-" in ok.stdout
        dup = emit("refund", "--key", "cli-1", "--input", '{"invoice_id": "i-1"}', "--json")
        assert dup.returncode == 0, dup.stderr
        reply = json.loads(dup.stdout)["reply"]
        assert reply["outcome"] == "DUPLICATE" and ok.stdout.split()[1] == reply["run_id"]
        no = emit("nope", "--key", "cli-2")
        assert no.returncode == 1 and "refused: unknown capability 'nope'" in no.stdout
        forged = emit("refund", "--key", "cli-3", "--input", "{}", "--tenant", "acme")
        assert forged.returncode == 1 and "speaks for tenant 'default'" in forged.stdout
        after = _samples(httpx.get(f"{base}/metrics").text)
        assert after[admitted] == before.get(admitted, 0.0) + 1
        assert after[refused] == before.get(refused, 0.0) + 1
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out
