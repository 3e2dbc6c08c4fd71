"""Run the queue service: the shared transactional processor around :class:`QueuesHandler`.

Delivery guarantee: exactly once per command — the queue's new row, the StartRuns of the runs
it releases and the input offset commit in one transaction; a new owner of a partition
restores the rows before it serves, and every decision is idempotent by run id
(docs/decisions.md 33).
"""

from __future__ import annotations

import threading

from runplane.config import Settings
from runplane.kafka.handler import Clock
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.serving.health import Health
from runplane.serving.shell import make_app, run_http
from services.queues.handler import QueuesHandler
from services.queues.settings import QueuesSettings
from services.queues.topology import INPUT, SERVICE, group_id


def build(
    settings: QueuesSettings, *, clock: Clock | None = None, health: Health | None = None
) -> Processor:
    """The processor, not started (tests run it in a thread and wait on ``.ready``)."""
    config = ProcessorConfig(
        service=SERVICE,
        group_id=group_id(settings.base),
        inputs=(INPUT,),
        batch_max=settings.batch_max,
        batch_ms=settings.batch_ms,
        tick_ms=settings.tick_ms,  # the rate limits' buckets refill (handler.tick)
    )
    probe = health.probe("processor") if health is not None else None
    return Processor(
        settings.base, config, QueuesHandler(settings.limits), clock=clock, probe=probe
    )


def serve(settings: Settings, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (``runplane serve queues``)."""
    own = QueuesSettings.from_env(base=settings)
    health = Health()
    processor = build(own, health=health)
    with run_http(make_app(health), settings.http_host, settings.http_port(SERVICE), stop):
        processor.run(stop)
