"""Fuzz the worklist's HTTP API from its own OpenAPI description (schemathesis): no 5xx.

The service runs as deployed (real broker, real Redis) with a valid bearer token on every
generated request, so the fuzzer gets past authentication into validation, the read model
and the command path. A real task exists, so generated ids sometimes hit it.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from confluent_kafka.admin import AdminClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from test_worklist_support import (
    auth,
    open_task,
    send,
    wait_for,
    worklist_service,
    write_principals,
)

from runplane.kafka.topics import create_topics, delete_topics
from runplane.stack import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def running(
    stack: LocalStack, admin_client: AdminClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    # Module-scoped (the per-test `settings` fixture would restart the service per operation).
    tag = uuid.uuid4().hex[:8]
    s = dataclasses.replace(stack.settings, topic_prefix=f"f{tag}.", instance_id=f"fuzz-{tag}")
    create_topics(s, admin_client)
    try:
        with worklist_service(s, write_principals(tmp_path_factory.mktemp("fuzz"))) as wl:
            task = open_task("fuzz-run/0/1", role="finance")
            send(s, task)
            wait_for(
                "the task",
                lambda: (
                    wl.client.get("/api/tasks/fuzz-run/0/1", headers=auth("bob")).status_code == 200
                ),
            )
            yield wl
    finally:
        delete_topics(s, admin_client)


def test_no_input_makes_the_api_fail(running: Any) -> None:
    # Driven by hand (not schemathesis' pytest plugin, which does not support this pytest):
    # every operation, valid and invalid inputs, each with its own hypothesis run.
    schema = schemathesis.openapi.from_url(f"{running.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 6
    statuses: list[int] = []
    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=40,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            # bob holds the task's role and did not start its run: the deepest path there is.
            response = case.call_and_validate(
                base_url=running.url, headers=auth("bob"), checks=[not_a_server_error]
            )
            statuses.append(response.status_code)

        try:
            fuzz()
        except Unsatisfiable:
            # An operation with nothing that can be made invalid (e.g. GET /api/me).
            assert mode is GenerationMode.NEGATIVE, operation.label
    # It really went through: many requests, valid and invalid, accepted and refused.
    assert len(statuses) >= 60, len(statuses)
    assert {200, 422} <= set(statuses), sorted(set(statuses))


def test_the_fuzz_reaches_the_real_task(running: Any) -> None:
    """The fixture's task is really there (the fuzz is not fuzzing an empty worklist)."""
    r = running.client.get("/api/tasks", headers=auth("bob"))
    assert any(t["task_id"] == "fuzz-run/0/1" for t in r.json()["tasks"])
