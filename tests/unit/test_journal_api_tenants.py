"""The journal API across two tenants: a principal lists, reads and verifies only the runs of
their own tenant; another tenant's run is 404 — without a Kafka read — as an unknown id is.

The run index learns a run's tenant from its RunAdmitted (seq 0) on the audit stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from test_journal_api_guards import START, FakeIndex, FakeReader

from runplane.core.chain import default_label
from runplane.journal.summary import RunSummary, apply
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import AuditRecord, JournalKind, RunStatus, Verdict
from services.journal.api import build_api

pytestmark = pytest.mark.unit

READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("a"), "roles": ["auditor"], "tenant": "acme"},
        {
            "name": "gil",
            "token_sha256": token_digest("g"),
            "roles": ["auditor"],
            "tenant": "globex",
        },
        {"name": "dee", "token_sha256": token_digest("d"), "roles": ["auditor"]},
    ]
)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _run(run_id: str, tenant: str | None) -> RunSummary:
    return RunSummary(
        run_id, status=RunStatus.COMPLETED, capability="refund", started_ms=START, tenant=tenant
    )


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, FakeReader]]:
    # r-1 is acme's (the reader serves its journal), r-2 globex's, r-0 from an older index.
    index = FakeIndex(
        {"r-1": _run("r-1", "acme"), "r-2": _run("r-2", "globex"), "r-0": _run("r-0", None)}
    )
    reader = FakeReader()
    app = build_api(lambda: index, reader, READERS)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=20) as c,
    ):
        yield c, reader
    stop.set()


def _listed(c: httpx.Client, token: str) -> set[str]:
    r = c.get("/runs", headers=_auth(token))
    assert r.status_code == 200, r.text
    return {run["run_id"] for run in r.json()["runs"]}


def test_each_principal_lists_only_their_tenants_runs(
    served: tuple[httpx.Client, FakeReader],
) -> None:
    c, _ = served
    assert _listed(c, "a") == {"r-1"}
    assert _listed(c, "g") == {"r-2"}
    assert _listed(c, "d") == {"r-0"}  # no tenant recorded: the tenant "default"
    assert c.get("/runs/r-1", headers=_auth("a")).json()["tenant"] == "acme"


@pytest.mark.parametrize("path", ["/runs/r-1", "/runs/r-1/journal", "/runs/r-1/verify"])
def test_another_tenants_run_is_404_and_never_read(
    served: tuple[httpx.Client, FakeReader], path: str
) -> None:
    c, reader = served
    r = c.get(path, headers=_auth("g"))
    assert r.status_code == 404 and "no run 'r-1'" in r.json()["detail"]
    assert reader.reads == []
    assert c.get(path, headers=_auth("a")).status_code == 200


def test_the_index_takes_the_tenant_from_run_admitted() -> None:
    def audit(seq: int, kind: JournalKind, attrs: dict[str, str]) -> AuditRecord:
        return AuditRecord(
            session_id="r-9",
            seq=seq,
            era=0,
            kind=kind,
            stamp_ms=START + seq,
            label=default_label(),
            attrs=attrs,
            hash="0" * 64,
            verdict=Verdict.VERIFIED,
            verified_ms=START,
        )

    s = apply(RunSummary("r-9"), audit(0, JournalKind.RUN_ADMITTED, {"tenant": "acme"}))
    s = apply(s, audit(1, JournalKind.RUN_COMPLETED, {"tenant": "forged"}))
    assert s.tenant == "acme"
