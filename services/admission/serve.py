"""Run the admission service: the shared transactional processor around AdmissionHandler.

Its HTTP port (:func:`http_app`) serves the health probes, ``POST /admit`` (``http.py``: signed
requests of emitters that do not speak Kafka, forwarded to the ``admission`` topic), signals and
cancel (``operate.py``), and their reference at ``/docs``.

Delivery guarantee: exactly once per request record — the claim, RunAdmitted, StartRun, the
reply and the input offset commit in one transaction (see ``decide.py``); a request handled
again after a crash is answered from the restored claims table, so a key never gets two runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import replace

from fastapi import FastAPI

from runplane.config import Settings
from runplane.core import AgentRegistry
from runplane.core.agents import import_agent_modules
from runplane.core.policy import Policy
from runplane.kafka.handler import Clock
from runplane.kafka.processor import BeforeCommit, Processor, ProcessorConfig
from runplane.providers import Offer, load_offer
from runplane.runs.client import Client
from runplane.serving.apidocs import api_app
from runplane.serving.auth import PrincipalsFile
from runplane.serving.health import Health
from runplane.serving.policy import load_policy
from runplane.serving.shell import health_routes, run_http
from runplane.signing.admission import watch_emitters
from services.admission import metrics
from services.admission.decide import CapabilitySpec
from services.admission.handler import AdmissionHandler
from services.admission.http import HttpAdmission
from services.admission.identity import Authentication
from services.admission.operate import HttpOperate
from services.admission.settings import AdmissionSettings
from services.admission.topology import INPUT, SERVICE, group_id

log = logging.getLogger(__name__)

_API_DOC = """Admission's HTTP API: ``POST /admit`` for emitters that do not speak Kafka, signals and
cancel for operators (bearer tokens). Errors are ``{"detail": why, "refused": code}``."""


def capabilities_from(
    registry: AgentRegistry, offer: Offer | None = None
) -> dict[str, CapabilitySpec]:
    """What admission needs of each registered agent: its name, its input schema and, given
    what the executor offers, why it cannot run there (a tool or model it needs is missing)."""
    return {
        name: CapabilitySpec(
            spec.input_schema,
            unavailable=None if offer is None else spec.unavailable(offer.tools, offer.models),
            versions=tuple(v.version for v in registry.versions(name) if v.version is not None),
        )
        for name, spec in registry.items()
    }


def load_capabilities(
    modules: tuple[str, ...], tools_config: str | None = None, policy_path: str | None = None
) -> dict[str, CapabilitySpec]:
    """Import ``RUNPLANE_AGENT_MODULES`` (each registers its agents and ``@tool`` functions),
    read the registry, and check it against the tools config (``RUNPLANE_TOOLS_CONFIG``);
    a capability the policy (``RUNPLANE_POLICY``) gives a queue waits in it."""
    registry = import_agent_modules(modules)
    offer = load_offer(tools_config, os.environ)
    caps = queued(capabilities_from(registry, offer), load_policy(policy_path))
    for name, cap in caps.items():
        if cap.unavailable is not None:
            log.warning("capability %s will be refused: %s", name, cap.unavailable)
    if not caps:
        log.warning("no capabilities registered: every request will be refused")
    return caps


def queued(caps: Mapping[str, CapabilitySpec], policy: Policy | None) -> dict[str, CapabilitySpec]:
    """The capabilities, those the policy declares a queue for sent to it (the queue's name
    is the capability's: one queue per capability, docs/decisions.md 33)."""
    declared = {} if policy is None else policy.queues
    return {
        name: replace(spec, queue=name) if name in declared else spec for name, spec in caps.items()
    }


def authentication(settings: AdmissionSettings) -> Authentication:
    """The emitters registry (re-read when its file changes) and the dev-mode flag."""
    emitters = watch_emitters(settings.emitters_file)  # read now: a bad file stops the start
    if settings.allow_unsigned:
        log.warning(
            "unsigned admission allowed (RUNPLANE_ADMISSION_ALLOW_UNSIGNED, dev mode): any "
            "principal that may write the admission topic names any tenant and initiator"
        )
    elif not emitters.current().emitters:
        log.warning("no emitters registered and unsigned admission is off: all is refused")
    return Authentication(emitters, settings.allow_unsigned, settings.signature_window_ms)


def build(
    settings: AdmissionSettings,
    *,
    capabilities: Mapping[str, CapabilitySpec] | None = None,
    clock: Clock | None = None,
    health: Health | None = None,
    instance_index: int | None = None,
    before_commit: BeforeCommit | None = None,
    auth: Authentication | None = None,
) -> Processor:
    """The processor, not started (tests run it in a thread and wait on ``.ready``)."""
    caps = (
        capabilities
        if capabilities is not None
        else load_capabilities(settings.modules, settings.base.tools_config, settings.policy_path)
    )
    config = ProcessorConfig(
        service=SERVICE,
        group_id=group_id(settings.base),
        inputs=(INPUT,),
        batch_max=settings.batch_max,
        batch_ms=settings.batch_ms,
        tick_ms=5_000,  # tombstones the refused signatures past their window (handler.tick)
        instance_index=instance_index,
        producer_overrides={"transaction.timeout.ms": settings.transaction_timeout_ms},
        consumer_overrides={"session.timeout.ms": settings.session_timeout_ms},
        journal_signer=settings.journal_signer,
    )
    handler = AdmissionHandler(
        caps,
        max_input_bytes=settings.max_input_bytes,
        observe=metrics.observe,
        auth=auth if auth is not None else authentication(settings),
        topic_prefix=settings.base.topic_prefix,
    )
    probe = health.probe("processor") if health is not None else None
    return Processor(
        settings.base, config, handler, clock=clock, probe=probe, before_commit=before_commit
    )


def http_app(health: Health, admit: HttpAdmission, operators: HttpOperate) -> FastAPI:
    """Admission's HTTP port: ``POST /admit``, signals and cancel, the probes and metrics;
    its reference at ``/docs`` (served offline) and errors as JSON, like every runplane API."""
    app = api_app(title="runplane admission", description=_API_DOC)
    app.router.routes.extend([*admit.routes(), *operators.routes(), *health_routes(health)])
    return app


def serve(settings: Settings, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (``runplane serve admission``)."""
    own = AdmissionSettings.from_env(base=settings)
    health = Health()
    auth = authentication(own)
    processor = build(own, health=health, auth=auth)
    # POST /admit (http.py) forwards signed requests through an emitter client of its own.
    with Client(settings) as client:
        operators = HttpOperate(PrincipalsFile.from_env(), client)  # signals, cancel
        app = http_app(health, HttpAdmission(auth, client), operators)
        with run_http(app, settings.http_host, settings.http_port(SERVICE), stop):
            processor.run(stop)
