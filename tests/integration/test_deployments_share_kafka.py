"""Two deployments on one Kafka do not fence each other (security review M6).

Transactional ids are cluster-wide. With ``admission-<instance>`` as the id, a second
deployment (another topic prefix) whose pod has the same name — ``admission-0`` in two
namespaces — fenced the first at ``init_transactions``, and the first died at its next
commit. The id now starts with the topic prefix. Here both deployments run side by side with
the same instance id, and both keep admitting after the other started.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from test_admission import CAPS, running

from runplane.config import Settings
from runplane.kafka.processor import ProcessorConfig
from runplane.kafka.topics import create_topics, delete_topics
from runplane.runs.client import Client
from runplane.wire import AdmissionOutcome
from services.admission.serve import build
from services.admission.settings import AdmissionSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def other_deployment(settings: Settings, admin_client: AdminClient) -> Iterator[Settings]:
    """The same cluster and instance id as ``settings``, another topic prefix."""
    other = dataclasses.replace(settings, topic_prefix=f"t{uuid.uuid4().hex[:8]}.")
    create_topics(other, admin_client)
    yield other
    delete_topics(other, admin_client)


def test_same_instance_id_under_two_prefixes_gets_two_transactional_ids(
    settings: Settings, other_deployment: Settings
) -> None:
    config = ProcessorConfig(service="admission", group_id="g", inputs=("admission",))
    ids = {config.transactional_id(s) for s in (settings, other_deployment)}
    assert ids == {
        f"{settings.topic_prefix}admission-{settings.instance_id}",
        f"{other_deployment.topic_prefix}admission-{settings.instance_id}",
    }


def test_two_deployments_with_the_same_pod_names_both_keep_admitting(
    settings: Settings, other_deployment: Settings
) -> None:
    first = build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)
    second = build(AdmissionSettings(base=other_deployment, allow_unsigned=True), capabilities=CAPS)
    with running(first), Client(settings) as a, Client(other_deployment) as b:
        assert first.ready.wait(60)
        before = a.admit("refund", "m6-before", {"invoice_id": "i"}, initiator="alice", timeout=30)
        assert before.outcome is AdmissionOutcome.ADMITTED
        with running(second):
            assert second.ready.wait(60)  # its init_transactions has run
            # The first deployment commits again after the second registered its id: a fenced
            # producer would fail here (and `running` would report the processor's error).
            after = a.admit(
                "refund", "m6-after", {"invoice_id": "i"}, initiator="alice", timeout=30
            )
            other = b.admit("refund", "m6-other", {"invoice_id": "i"}, initiator="bob", timeout=30)
    assert after.outcome is AdmissionOutcome.ADMITTED
    assert other.outcome is AdmissionOutcome.ADMITTED
