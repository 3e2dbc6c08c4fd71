"""The services on a broker with SASL/SCRAM over TLS and ACLs: each principal holds exactly the
ACLs of its role (``runplane.kafka.acls``, docs/security.md), a run goes from an emitter
through admission and the executor to completion, and a principal lacking an ACL stops with
what to grant instead of polling or abort-looping forever."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from runplane.config import Settings
from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx
from runplane.kafka.acls import Grant, bindings, grants
from runplane.kafka.clients import admin
from runplane.kafka.topics import create_topics
from runplane.providers import FunctionTool
from runplane.runs.client import Client
from runplane.stack import LocalStack
from runplane.wire import AdmissionOutcome, RunStatus
from services.admission.decide import CapabilitySpec
from services.admission.serve import build as build_admission
from services.admission.settings import AdmissionSettings
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import executor_thread
from tests.integration.secured_broker import ADMIN, SecuredBroker, secured_broker

pytestmark = pytest.mark.integration

USERS = {
    "runplane-admission": "admission-secret",
    "runplane-executor": "executor-secret",
    "runplane-emitter": "emitter-secret",
    "stranger": "stranger-secret",
    "no-group": "no-group-secret",
}

REGISTRY = AgentRegistry()
_INC = EffectDecl("inc", mutating=False, recovery=Recovery.RETRY, timeout_s=5.0)


@REGISTRY.agent("secured", effects=[_INC])
async def secured(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    return dict(await ctx.tool("inc", {"n": int(input["n"])}))


def _inc(n: int) -> dict[str, int]:
    return {"n": n + 1}


@pytest.fixture(scope="module")
def broker(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with secured_broker(stack.config, tmp_path_factory.mktemp("secured"), USERS) as b:
        yield b


@pytest.fixture
def base(stack: LocalStack) -> Settings:
    return dataclasses.replace(
        stack.settings,
        topic_prefix=f"s{uuid.uuid4().hex[:8]}.",
        instance_id=f"sec-{uuid.uuid4().hex[:6]}",
    )


def _grant(broker: SecuredBroker, base: Settings, role: str, user: str) -> None:
    _create_acls(broker.settings(base, *ADMIN), user, grants(role, base.topic_prefix))


def _create_acls(root: Settings, user: str, rules: tuple[Grant, ...]) -> None:
    client = admin(root)  # held until the futures resolve: a collected client cancels them
    wanted = bindings(f"User:{user}", rules)
    for future in client.create_acls(wanted).values():
        future.result(timeout=30)
    # The controller answered; the broker's authorizer applies the ACLs from the metadata log
    # a moment later. describe_acls is answered by that authorizer: wait until it has them.
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while set(wanted) - set(client.describe_acls(everything).result(timeout=30)):
        assert time.monotonic() < deadline, "the broker never applied the ACLs"
        time.sleep(0.2)


def _as(broker: SecuredBroker, base: Settings, user: str) -> Settings:
    return broker.settings(base, user, USERS[user])


def _executor(settings: Settings) -> ExecutorSettings:
    return ExecutorSettings(base=settings, agent_modules=())


def test_a_run_goes_end_to_end_with_each_service_under_its_own_principal(
    broker: SecuredBroker, base: Settings
) -> None:
    root = broker.settings(base, *ADMIN)
    create_topics(root, admin(root))
    for role in ("admission", "executor", "emitter"):
        _grant(broker, base, role, f"runplane-{role}")
    processor = build_admission(
        AdmissionSettings(base=_as(broker, base, "runplane-admission"), allow_unsigned=True),
        capabilities={"secured": CapabilitySpec({"type": "object"})},
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), daemon=True)
    thread.start()
    client = Client(_as(broker, base, "runplane-emitter"))
    tools = {"inc": FunctionTool("inc", _inc, decl=_INC)}
    try:
        assert processor.ready.wait(120), "admission never got its partitions"
        with executor_thread(
            _executor(_as(broker, base, "runplane-executor")),
            tools=tools,
            providers={},
            registry=REGISTRY,
        ):
            reply = client.admit("secured", "k-1", {"n": 41}, initiator="alice", timeout=120)
            assert reply.outcome is AdmissionOutcome.ADMITTED and reply.run_id is not None
            done = client.wait(reply.run_id, timeout=120)
    finally:
        client.close()
        stop.set()
        thread.join(60)
    assert done.status is RunStatus.COMPLETED
    assert done.output_json == '{"n":42}'


def test_a_principal_without_acls_stops_and_says_what_to_grant(
    broker: SecuredBroker, base: Settings
) -> None:
    root = broker.settings(base, *ADMIN)
    create_topics(root, admin(root))
    executor = executor_thread(_executor(_as(broker, base, "stranger")), ready_timeout_s=60)
    with pytest.raises(Exception, match="runplane acls") as refused, executor:
        pass
    assert "refused this principal" in str(refused.value)


def test_a_principal_missing_its_group_acl_stops_instead_of_waiting_forever(
    broker: SecuredBroker, base: Settings
) -> None:
    root = broker.settings(base, *ADMIN)
    create_topics(root, admin(root))
    rules = tuple(
        g for g in grants("executor", base.topic_prefix) if g.name != f"{base.topic_prefix}executor"
    )
    _create_acls(root, "no-group", rules)
    executor = executor_thread(_executor(_as(broker, base, "no-group")), ready_timeout_s=60)
    with pytest.raises(Exception, match="consumer group"), executor:
        pass
