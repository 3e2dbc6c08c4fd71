"""Run the cases service: the shared transactional processor around :class:`CasesHandler`."""

from __future__ import annotations

import threading

from runplane.config import Settings
from runplane.kafka.handler import Clock
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.serving.health import Health
from runplane.serving.shell import make_app, run_http
from services.cases.handler import CasesHandler
from services.cases.settings import CasesSettings
from services.cases.topology import INPUT, SERVICE, group_id


def build(
    settings: CasesSettings, *, clock: Clock | None = None, health: Health | None = None
) -> Processor:
    """The processor, not started (tests run it in a thread and wait on ``.ready``)."""
    config = ProcessorConfig(
        service=SERVICE,
        group_id=group_id(settings.base),
        inputs=(INPUT,),
        batch_max=settings.batch_max,
        batch_ms=settings.batch_ms,
        # Breach follow-ups go to admission signed, so they pass where signatures are required.
        signers={} if settings.emitter_key is None else {"admission": settings.emitter_key.headers},
        journal_signer=settings.journal_signer,
    )
    probe = health.probe("processor") if health is not None else None
    return Processor(
        settings.base, config, CasesHandler(warn_role=settings.warn_role), clock=clock, probe=probe
    )


def serve(settings: Settings, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (``runplane serve cases``)."""
    own = CasesSettings.from_env(base=settings)
    health = Health()
    processor = build(own, health=health)
    with run_http(make_app(health), settings.http_host, settings.http_port(SERVICE), stop):
        processor.run(stop)
