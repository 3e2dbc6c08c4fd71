"""Wiring: the single writer, the read-model indexer and the HTTP app, on port 8305.

``serve(settings, stop)`` blocks until ``stop`` is set. Three pieces of work:

- the processor (``handler.py`` on the shared transactional processor): the single writer of
  ``tasks``, expiring due tasks on its tick;
- the indexer (``readmodel.py``): ``tasks`` → Redis, rebuilt from the topic when missing;
- the HTTP app: the API (``api.py``), the page (``page.py``), ``/healthz`` and ``/metrics``.

If the processor or the indexer dies the process stops non-zero; the supervisor restarts it
(the processor's stable transactional.id aborts whatever it left open).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

from fastapi import FastAPI

from runplane.config import Settings
from runplane.kafka.handler import Clock
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.runs.stream import Follow, follow
from runplane.serving.auth import PrincipalsFile, PrincipalSource
from runplane.serving.health import Health
from runplane.serving.shell import health_routes, run_http
from services.worklist.access import Policy
from services.worklist.actions import Worklist
from services.worklist.api import build_api
from services.worklist.gateway import Gateway
from services.worklist.handler import WorklistHandler
from services.worklist.page import install_page
from services.worklist.readmodel import Indexer, TaskStore
from services.worklist.settings import WorklistSettings
from services.worklist.topology import INPUT, SERVICE, group_id

__all__ = ["build_app", "build_processor", "policy_of", "serve"]

log = logging.getLogger(__name__)


def policy_of(ws: WorklistSettings, principals: PrincipalSource) -> Policy:
    """The rules' policy from the settings: roles and tenants from ``principals``, escalation
    and supervisor roles, the claim lease."""
    return Policy(
        principals.roles_of,
        tenant_of=principals.tenant_of,
        escalation_role=ws.escalation_role,
        supervisor_role=ws.supervisor_role,
        claim_ttl_ms=ws.claim_ttl_ms,
    )


def build_processor(
    ws: WorklistSettings,
    policy: Policy,
    *,
    clock: Clock | None = None,
    health: Health | None = None,
) -> Processor:
    """The single writer, not started (tests run it in a thread and wait on ``.ready``)."""
    config = ProcessorConfig(
        service=SERVICE,
        group_id=group_id(ws.base),
        inputs=(INPUT,),
        batch_max=ws.batch_max,
        batch_ms=ws.batch_ms,
        tick_ms=ws.tick_ms,
    )
    probe = health.probe("processor") if health is not None else None
    return Processor(ws.base, config, WorklistHandler(policy), clock=clock, probe=probe)


def build_app(
    worklist: Worklist,
    principals: PrincipalSource,
    health: Health | None = None,
    *,
    public_origin: str | None = None,
    runs_ui: str | None = None,
    stream: Follow | None = None,
) -> FastAPI:
    """The API and the page (plus health and metrics when ``health`` is given); ``stream``
    follows a run's live stream for the task page's proposed calls."""
    app = build_api(worklist, principals)
    install_page(
        app, worklist, principals, public_origin=public_origin, runs_ui=runs_ui, stream=stream
    )
    if health is not None:
        app.router.routes.extend(health_routes(health))
    return app


def serve(
    settings: Settings,
    stop: threading.Event,
    *,
    worklist: WorklistSettings | None = None,
    port: int | None = None,
    on_listening: Callable[[int], None] | None = None,
) -> None:
    """Serve until ``stop`` is set (``runplane serve worklist``).

    ``worklist``/``port`` override what the environment says (tests pass port 0 and learn
    the bound port through ``on_listening``).
    """
    ws = worklist or WorklistSettings.from_env(base=settings)
    # Re-read when the file changes (a rotated secret): the API, the page and the writer's
    # role checks all ask this one object.
    principals = PrincipalsFile(ws.principals_file)
    if not principals.current().principals:
        log.warning(
            "no principals configured (RUNPLANE_WORKLIST_PRINCIPALS_FILE): nobody can sign in"
        )
    policy = policy_of(ws, principals)
    health = Health()
    processor = build_processor(ws, policy, health=health)
    store = TaskStore.from_settings(settings)
    indexer = Indexer(settings, store, probe=health.probe("readmodel"))
    gateway = Gateway(settings, indexer, wait_ms=ws.wait_ms)
    app = build_app(
        Worklist(store, gateway, policy),
        principals,
        health,
        public_origin=ws.public_origin,
        runs_ui=ws.runs_ui,
        stream=functools.partial(follow, settings),
    )
    failed = threading.Event()

    def run_indexer() -> None:
        try:
            indexer.run(stop)
        except BaseException:
            log.exception("worklist read-model indexer stopped")
            failed.set()
            stop.set()

    bind = settings.http_port(SERVICE) if port is None else port
    with run_http(app, settings.http_host, bind, stop) as server:
        log.info("worklist listening", extra={"port": server.port})
        if on_listening is not None:
            on_listening(server.port)
        thread = threading.Thread(target=run_indexer, name="worklist-indexer", daemon=True)
        thread.start()
        try:
            processor.run(stop)
        finally:
            stop.set()
            thread.join(30)
            gateway.close()
    if failed.is_set():
        raise SystemExit(1)
