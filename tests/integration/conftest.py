"""Fixtures for tests against the real local stack (Kafka 4.x KRaft + Redis).

``stack`` (session)
    Starts the stack once through :func:`runplane.stack.ensure_up`, or reuses the one already
    answering on the configured ports (``make up``). It is left running afterwards, so the next
    run starts in a second; ``make down`` stops it. Yields a :class:`runplane.stack.LocalStack`
    (``.settings``, ``.config``, ``.report``).
``admin_client`` (session)
    An ``AdminClient`` for that stack.
``empty_settings`` (function)
    ``Settings`` with a unique topic prefix (``t<8 hex>.``) and instance id, and no topics yet:
    for a test that creates its own with ``create_topics(..., overrides=...)``. Every catalogue
    topic under the prefix is deleted after the test (``RUNPLANE_TEST_KEEP_TOPICS=1`` keeps them).
``settings`` (function)
    The same, with every catalogue topic created.
``topics`` (function)
    Logical name → full name of those topics (``topics["journal"]`` → ``"t1a2b3c4d.journal"``).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from runplane.config import Settings
from runplane.kafka.clients import admin
from runplane.kafka.topics import create_topics, delete_topics, topic_names
from runplane.stack import LocalStack, StackError, ensure_up

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def stack() -> LocalStack:
    try:
        return ensure_up(Settings.from_env(), root=REPO_ROOT)
    except StackError as exc:
        pytest.fail(f"the local stack is not available: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def admin_client(stack: LocalStack) -> AdminClient:
    return admin(stack.settings)


@pytest.fixture
def empty_settings(stack: LocalStack, admin_client: AdminClient) -> Iterator[Settings]:
    tag = uuid.uuid4().hex[:8]
    settings = dataclasses.replace(
        stack.settings, topic_prefix=f"t{tag}.", instance_id=f"test-{tag}"
    )
    yield settings
    if not os.environ.get("RUNPLANE_TEST_KEEP_TOPICS"):
        delete_topics(settings, admin_client)


@pytest.fixture
def settings(empty_settings: Settings, admin_client: AdminClient) -> Settings:
    create_topics(empty_settings, admin_client)
    return empty_settings


@pytest.fixture
def topics(settings: Settings) -> dict[str, str]:
    return topic_names(settings)
