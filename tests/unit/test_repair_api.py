"""The repair routes of the journal API: operators only, their tenant's runs only, refused
(409) for a run in the wrong state, the operator named from the token in the order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from test_journal_api_guards import START, FakeIndex, FakeReader

from runplane.core import repair as core
from runplane.journal.summary import RunSummary
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus, SessionSnapshot
from services.journal.api import build_api

pytestmark = pytest.mark.unit

PEOPLE = Principals.from_data(
    [
        {"name": "ops", "token_sha256": token_digest("o"), "roles": ["operator"], "tenant": "acme"},
        {"name": "aud", "token_sha256": token_digest("a"), "roles": ["auditor"], "tenant": "acme"},
        {
            "name": "gil",
            "token_sha256": token_digest("g"),
            "roles": ["operator"],
            "tenant": "globex",
        },
    ]
)


def _snap(run_id: str, status: RunStatus) -> SessionSnapshot:
    return SessionSnapshot(
        session_id=run_id,
        capability="refund",
        status=status,
        era=0,
        next_seq=4,
        last_hash="a" * 64,
        admission_key="k",
        tenant="acme",
        initiator="emitter",
        input_json="{}",
        started_ms=START,
        updated_ms=START,
    )


@dataclass
class FakeRepairer:
    snaps: dict[str, SessionSnapshot]
    orders: list[tuple[str, core.RepairOrder]] = field(default_factory=list)

    def snapshot(self, run_id: str) -> SessionSnapshot | None:
        return self.snaps.get(run_id)

    def order(self, run_id: str, order: core.RepairOrder) -> None:
        self.orders.append((run_id, order))

    def fork(self, run_id: str, from_seq: int, order: core.RepairOrder) -> str:
        if from_seq > 3:
            raise core.RepairRefused("--from-seq must be between 1 and 3")
        self.orders.append((run_id, order))
        return "r-fork"


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, FakeRepairer]]:
    runs = {
        "r-q": RunSummary("r-q", status=RunStatus.QUARANTINED, started_ms=START, tenant="acme"),
        "r-live": RunSummary("r-live", status=RunStatus.PARKED, started_ms=START, tenant="acme"),
    }
    repairer = FakeRepairer(
        {"r-q": _snap("r-q", RunStatus.QUARANTINED), "r-live": _snap("r-live", RunStatus.PARKED)}
    )
    app = build_api(lambda: FakeIndex(runs), FakeReader(), PEOPLE, repairer=repairer)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=20) as c,
    ):
        yield c, repairer
    stop.set()


def _post(c: httpx.Client, path: str, token: str | None, body: dict[str, object]) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return c.post(path, json=body, headers=headers)


def test_only_operators_of_the_runs_tenant_repair(
    served: tuple[httpx.Client, FakeRepairer],
) -> None:
    c, repairer = served
    assert _post(c, "/runs/r-q/resume", None, {}).status_code == 401
    assert _post(c, "/runs/r-q/resume", "a", {}).status_code == 403
    assert _post(c, "/runs/r-q/resume", "g", {}).status_code == 404  # another tenant's run
    assert repairer.orders == []
    r = _post(c, "/runs/r-q/resume", "o", {"reason": "fixed", "by": "mallory"})
    assert r.status_code == 202, r.text
    assert r.json()["by"] == "ops"
    [(run_id, order)] = repairer.orders
    assert (run_id, order) == ("r-q", core.RepairOrder(core.RepairKind.RESUME, "ops", "fixed"))


def test_wrong_state_is_409(served: tuple[httpx.Client, FakeRepairer]) -> None:
    c, repairer = served
    r = _post(c, "/runs/r-live/erase", "o", {})
    assert r.status_code == 409 and "only ended runs are erased" in r.json()["detail"]
    assert _post(c, "/runs/r-live/resume", "o", {}).status_code == 409
    assert _post(c, "/runs/r-q/fork", "o", {"from_seq": 9}).status_code == 409
    assert _post(c, "/runs/r-q/fork", "o", {"from_seq": 0}).status_code == 422
    assert _post(c, "/runs/r-q/resume", "o", {"reason": "x" * 201}).status_code == 422
    assert repairer.orders == []
    r = _post(c, "/runs/r-q/fork", "o", {"from_seq": 2})
    assert r.status_code == 202 and r.json()["fork_id"] == "r-fork"
    assert _post(c, "/runs/r-q/erase", "o", {}).status_code == 202
