"""Fuzz the journal's run-query API from its own OpenAPI description (schemathesis CLI): no 5xx.

The whole journal service runs as deployed (``services.journal.serve``: the audit loop, the
run indexer and the API, on the port its settings give — ``RUNPLANE_JOURNAL_PORT=0`` here, a
free one), against the real broker and Redis, with a readers file. Two runs are in the
journal and, through the service's own audit stream, in the run index: one completed, one
still running. The stateful phase feeds the ids ``GET /runs`` lists into ``/runs/{run_id}``,
``/journal`` and ``/verify``, so the fuzz reaches the Kafka scans and the chain verifier,
not only validation and the index's 404.

- Authenticated as ada (auditor: ``bodies=true`` reads each call's body) and as bob (any
  other principal: ``bodies=true`` is a 403).
- Unauthenticated: no token, an empty or garbage ``Authorization``, or an unknown token.
  Nothing may succeed and nothing may get past authentication (no 403, no run-level 404).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from confluent_kafka.admin import AdminClient
from fuzz_support import budget_s, run_schemathesis
from test_journal_service import produce_run
from test_worklist_support import Running, auth, token, write_principals

from runplane.kafka.topics import create_topics, delete_topics
from runplane.stack import LocalStack
from services.journal import serve as journal_serve
from services.journal.settings import JournalSettings
from tests.helpers.sample import sample_run
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

BUDGET_S = budget_s(30)  # per authenticated run; an unauthenticated run gets half
# A run's live stream (server-sent events) answers until the run ends: a request to the
# running run's would spend the whole budget waiting. Its refusals are unit-tested
# (tests/unit/test_journal_api_stream.py); its events by tests/integration/test_run_stream.py.
NOT_STREAMS = ("--exclude-path-regex", "/stream$")


class _Listening(logging.Handler):
    """Catches the port ``serve`` logs once it listens (it takes no callback; port 0 is
    bound inside it, so the log line is the one place the real port shows)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ports: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        port = getattr(record, "port", None)
        if record.getMessage() == "journal service listening" and isinstance(port, int):
            self.ports.append(port)


@pytest.fixture(scope="module")
def running(
    stack: LocalStack, admin_client: AdminClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Running, list[str]]]:
    tag = uuid.uuid4().hex[:8]
    s = dataclasses.replace(stack.settings, topic_prefix=f"j{tag}.", instance_id=f"jfuzz-{tag}")
    create_topics(s, admin_client)
    js = JournalSettings(
        base=s,
        readers_file=write_principals(tmp_path_factory.mktemp("jfuzz")),
        body_grace_ms=1500,
        max_hold_ms=4500,
    )
    listening = _Listening()
    logger = logging.getLogger(journal_serve.__name__)
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(listening)
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            journal_serve.serve(s, stop, journal=js)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=body, name="journal", daemon=True)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RUNPLANE_JOURNAL_PORT", "0")
            thread.start()
            wait_for(lambda: listening.ports or errors, what="the journal to listen", timeout_s=60)
        assert not errors, errors
        url = f"http://127.0.0.1:{listening.ports[0]}"
        now = time.time_ns() // 1_000_000
        done, still = f"jf-done-{tag}", f"jf-running-{tag}"
        recs, res = sample_run(done, calls=3, capability="refund", case_id="c-fuzz", start_ms=now)
        produce_run(s, recs, res)
        recs, res = sample_run(still, calls=2, capability="triage", case_id=None, start_ms=now)
        produce_run(s, recs[:3], res)  # no RunCompleted: still running
        with httpx.Client(base_url=url, timeout=30, headers=auth("bob")) as client:
            for run_id in (done, still):
                wait_for(functools.partial(_indexed, client, run_id), what=run_id, timeout_s=90)
            yield Running(url, client), [done, still]
    finally:
        stop.set()
        thread.join(60)
        logger.removeHandler(listening)
        logger.setLevel(level)
        delete_topics(s, admin_client)
    assert not errors, errors


def _indexed(client: httpx.Client, run_id: str) -> bool:
    return client.get(f"/runs/{run_id}").status_code == 200


def _still_healthy(running: Running) -> None:
    # A fuzz that killed the audit loop or the indexer would pass every per-request check.
    assert running.client.get("/healthz").status_code == 200


@pytest.mark.parametrize("who", ["ada", "bob"])
def test_authenticated_fuzz_finds_no_server_error(
    running: tuple[Running, list[str]], who: str, tmp_path: Path
) -> None:
    service, runs = running
    result = run_schemathesis(
        service.url, tmp_path, headers=auth(who), max_time_s=BUDGET_S, extra=NOT_STREAMS
    )
    print(result.summary())
    assert result.returncode == 0, result.explain()
    _still_healthy(service)
    statuses = result.statuses
    # Fewer than the worklist's: a journal or verify read scans a Kafka partition (~340 in
    # 30 s here).
    assert sum(statuses.values()) >= 100, result.explain()
    assert {200, 404, 422} <= set(statuses), result.explain()
    assert 401 not in statuses, result.explain()
    assert {e.authorization for e in result.exchanges} == {f"Bearer {token(who)}"}
    # The fuzz read a real run's journal from Kafka and verified its chain.
    for leaf in ("journal", "verify"):
        read = [
            e
            for e in result.exchanges
            if e.status == 200
            and any(unquote(e.url.split("?")[0]).endswith(f"/runs/{r}/{leaf}") for r in runs)
        ]
        assert read, (leaf, result.explain())
    # Bodies are for auditors only, however the request asks for them.
    journals = [
        json.loads(e.body)
        for e in result.exchanges
        if e.status == 200 and unquote(e.url.split("?")[0]).endswith("/journal")
    ]
    with_bodies = [j["run_id"] for j in journals if j["bodies"] is not None]
    if who != "ada":
        assert not with_bodies, with_bodies[:3]


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token"])
def test_unauthenticated_fuzz_gets_nowhere(
    running: tuple[Running, list[str]], authorization: str | None, tmp_path: Path
) -> None:
    service, _ = running
    headers = None if authorization is None else {"Authorization": authorization}
    result = run_schemathesis(
        service.url, tmp_path, headers=headers, max_time_s=BUDGET_S // 2, extra=NOT_STREAMS
    )
    print(result.summary())
    assert result.returncode == 0, result.explain()
    _still_healthy(service)
    statuses = result.statuses
    assert sum(statuses.values()) >= 100, result.explain()
    assert 401 in statuses, result.explain()
    assert not [s for s in statuses if 200 <= s < 300 or s == 403], result.explain()
    # Only the router's own 404 (no route matches the path), never "no run ...".
    run_404 = [e for e in result.exchanges if e.status == 404 and "no run" in e.body]
    assert not run_404, run_404[:3]
    sent = {e.authorization for e in result.exchanges}
    if authorization is None:
        assert None in sent and len(sent) >= 3, sorted(map(str, sent))[:10]
    else:
        assert sent == {authorization}
