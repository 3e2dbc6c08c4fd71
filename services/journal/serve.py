"""Wiring: the audit loop, the run indexer and the HTTP API on the journal service's port.

``serve(settings, stop)`` blocks until ``stop`` is set. Three threads of work:

- the audit loop (``loop.py``) — verifies chains, publishes ``audit``, quarantines;
- the indexer (``indexer.py``) — folds ``audit`` into the Redis run index (``RUNPLANE_JOURNAL_INDEX=0``
  turns it off, e.g. for an instance that only audits);
- the HTTP server (``api.py`` + ``/healthz`` + ``/metrics``) on port 8306
  (``RUNPLANE_JOURNAL_PORT`` overrides; 0 picks a free port).

If the audit loop dies (fenced, fatal) the process stops: the supervisor restarts it with the
same transactional.id, which aborts whatever it left open.
"""

from __future__ import annotations

import functools
import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from runplane.config import Settings
from runplane.core.repair import RepairOrder
from runplane.journal.index import RunIndex
from runplane.runs.read import RunHistory, read_audit, read_case, read_run
from runplane.runs.repair import read_snapshot, send_order, write_fork
from runplane.runs.stream import follow
from runplane.serving.auth import PrincipalsFile
from runplane.serving.health import Health
from runplane.serving.shell import health_routes, run_http
from runplane.signing.journal import Keyring, Signer
from runplane.wire import AuditRecord, CaseRecord, SessionSnapshot
from services.journal.api import build_api
from services.journal.indexer import Indexer
from services.journal.loop import AuditLoop
from services.journal.settings import JournalSettings

log = logging.getLogger(__name__)


class _Runs(Protocol):
    def run(self, stop: threading.Event) -> None: ...


@dataclass(frozen=True)
class KafkaRunReader:
    """Reads a run straight from the topics (``runplane.runs.read``)."""

    settings: Settings
    keyring: Keyring | None = None  # checks each record's writer signature when set

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory:
        return read_run(
            self.settings, run_id, bodies=bodies, since_ms=since_ms, keyring=self.keyring
        )

    def audit(self, run_id: str) -> list[AuditRecord]:
        return read_audit(self.settings, run_id)

    def case(self, case_id: str) -> CaseRecord | None:
        return read_case(self.settings, case_id)

    def snapshot(self, run_id: str) -> SessionSnapshot | None:
        return read_snapshot(self.settings, run_id)


@dataclass(frozen=True)
class KafkaRepairer:
    """Repair orders onto the topics (``runplane.runs.repair``), for the repair routes."""

    settings: Settings
    signer: Signer | None = None  # signs a fork's journal records (JournalSettings)

    def snapshot(self, run_id: str) -> SessionSnapshot | None:
        return read_snapshot(self.settings, run_id)

    def order(self, run_id: str, order: RepairOrder) -> None:
        send_order(self.settings, run_id, order)

    def fork(self, run_id: str, from_seq: int, order: RepairOrder) -> str:
        return write_fork(self.settings, run_id, from_seq, order, signer=self.signer)


def serve(
    settings: Settings, stop: threading.Event, *, journal: JournalSettings | None = None
) -> None:
    """Run the journal service until ``stop`` is set."""
    js = journal or JournalSettings.from_env(base=settings)
    health = Health()
    index = RunIndex.from_url(settings.redis_url, settings.topic_prefix) if js.index else None
    app = build_api(
        lambda: index,
        KafkaRunReader(settings, js.keyring),
        PrincipalsFile(js.readers_file),
        max_scans=js.max_scans,
        public_origin=js.public_origin,
        worklist_ui=js.worklist_ui,
        repairer=KafkaRepairer(settings, js.journal_signer),
        stream=functools.partial(follow, settings),
    )
    app.router.routes.extend(health_routes(health))
    loop = AuditLoop(js, probe=health.probe("audit"))
    threads: list[threading.Thread] = []
    failed = threading.Event()

    def guarded(name: str, target: _Runs) -> threading.Thread:
        def body() -> None:
            try:
                target.run(stop)
            except BaseException:
                log.exception("%s stopped", name)
                failed.set()
                stop.set()

        t = threading.Thread(target=body, name=f"journal-{name}", daemon=True)
        t.start()
        return t

    with run_http(app, settings.http_host, settings.http_port("journal"), stop) as server:
        log.info("journal service listening", extra={"port": server.port})
        threads.append(guarded("audit", loop))
        if index is not None:
            threads.append(
                guarded("indexer", Indexer(settings, index, probe=health.probe("indexer")))
            )
        stop.wait()
        for t in threads:
            t.join(30)
    if failed.is_set():
        raise SystemExit(1)
