"""Fuzz the worklist's HTTP API from its own OpenAPI description (schemathesis CLI): no 5xx.

The service runs as deployed (``services.worklist.serve``, real broker, real Redis, a
principals file). Real tasks exist — approvals for the role finance (one needing two
approvals) and an operator task — so the stateful phase, which feeds the ids that
``GET /api/tasks`` lists into show/claim/release/decide, reaches the command path and the
single writer, not only validation.

- Authenticated: every request carries a valid token (the CLI's header overrides whatever the
  fuzzer generates for ``Authorization``): once as bob (finance: may act on the approvals),
  once as sue (supervisor and operator: the operator task, releasing others' claims).
- Unauthenticated: no token, an empty or garbage ``Authorization`` (the fuzzer generates the
  header from the description), or a well-formed unknown token. Nothing may succeed and
  nothing may get past authentication to a task (no 403/409, no task-level 404).

Each run has a fixed time budget (the CLI's ``--max-time``); it replaces the earlier
hand-driven loop over schemathesis strategies, whose positive/negative generation is the
CLI's fuzzing phase, which also runs the coverage and stateful phases.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from confluent_kafka.admin import AdminClient
from fuzz_support import budget_s, run_schemathesis
from test_worklist_support import (
    Running,
    auth,
    open_task,
    send,
    token,
    worklist_service,
    write_principals,
)

from runplane.kafka.topics import create_topics, delete_topics
from runplane.stack import LocalStack
from runplane.wire import TaskKind
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

BUDGET_S = budget_s(30)  # per authenticated run; an unauthenticated run gets half
TASKS = ("fuzz-run/0/1", "fuzz-two/0/1", "fuzz-op/0/1")


@pytest.fixture(scope="module")
def running(
    stack: LocalStack, admin_client: AdminClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    # Module-scoped: one service (and one set of topics) for every fuzz run here.
    tag = uuid.uuid4().hex[:8]
    s = dataclasses.replace(stack.settings, topic_prefix=f"f{tag}.", instance_id=f"fuzz-{tag}")
    create_topics(s, admin_client)
    try:
        with worklist_service(s, write_principals(tmp_path_factory.mktemp("fuzz"))) as wl:
            call = {
                "effect": "tool://billing/charge",
                "request": {"args": {"amount_cents": 1200}, "idempotency_key": "k-fuzz"},
            }
            send(
                s,
                open_task(TASKS[0], role="finance"),
                open_task(TASKS[1], role="finance", approvals=2),
                open_task(
                    TASKS[2],
                    kind=TaskKind.OPERATOR,
                    role="operator",
                    question="Did the charge happen?",
                    answer_json=json.dumps(call),
                ),
            )
            for task_id, who in zip(TASKS, ("bob", "bob", "sue"), strict=True):
                wait_for(functools.partial(_visible, wl, task_id, who), what=task_id)
            yield wl
    finally:
        delete_topics(s, admin_client)


def _visible(running: Running, task_id: str, who: str) -> bool:
    return running.client.get(f"/api/tasks/{task_id}", headers=auth(who)).status_code == 200


def _still_healthy(running: Running) -> None:
    # A fuzz that killed the writer or the indexer thread would still pass the 5xx check
    # on every request that never reached them.
    assert running.client.get("/healthz").status_code == 200


@pytest.mark.parametrize("who", ["bob", "sue"])
def test_authenticated_fuzz_finds_no_server_error(
    running: Running, who: str, tmp_path: Path
) -> None:
    result = run_schemathesis(running.url, tmp_path, headers=auth(who), max_time_s=BUDGET_S)
    print(result.summary())
    assert result.returncode == 0, result.explain()
    _still_healthy(running)
    # It really went through: many requests, valid and invalid, every one with the token.
    statuses = result.statuses
    assert sum(statuses.values()) >= 200, result.explain()
    assert {200, 422} <= set(statuses), result.explain()
    assert 401 not in statuses, result.explain()
    assert {e.authorization for e in result.exchanges} == {f"Bearer {token(who)}"}
    # ... and into the command path on a real task: a claim, release or decision was applied
    # (200) or refused by the writer's rules (403 four-eyes/role, 409 conflict).
    reached = [
        e
        for e in result.exchanges
        if e.method == "POST"
        and any(t in unquote(e.url) for t in TASKS)  # the id's slashes go as %2F
        and e.status in (200, 403, 409)
    ]
    assert reached, result.explain()


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token"])
def test_unauthenticated_fuzz_gets_nowhere(
    running: Running, authorization: str | None, tmp_path: Path
) -> None:
    headers = None if authorization is None else {"Authorization": authorization}
    result = run_schemathesis(running.url, tmp_path, headers=headers, max_time_s=BUDGET_S // 2)
    print(result.summary())
    assert result.returncode == 0, result.explain()
    _still_healthy(running)
    statuses = result.statuses
    assert sum(statuses.values()) >= 100, result.explain()
    assert 401 in statuses, result.explain()
    # Nothing succeeds and nothing reaches a task: authentication comes first. What may come
    # back besides 401 is decided before it: 405 (no such method), 400/422 (an unreadable
    # body), and the router's own 404 for a path no route matches (a newline in an id).
    assert not [s for s in statuses if 200 <= s < 300 or s in (403, 409)], result.explain()
    task_404 = [
        e for e in result.exchanges if e.status == 404 and e.body != '{"detail":"Not Found"}'
    ]
    assert not task_404, task_404[:3]
    sent = {e.authorization for e in result.exchanges}
    if authorization is None:
        # The fuzzer both left the header out and made up values for it.
        assert None in sent and len(sent) >= 3, sorted(map(str, sent))[:10]
    else:
        assert sent == {authorization}
