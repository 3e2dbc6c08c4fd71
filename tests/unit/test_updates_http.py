"""``POST /runs/{run}/updates`` and ``GET /runs/{run}/queries/{name}`` over a run the test
Driver plays (in Kafka's place): identity and tenant from the token, the answer or the
refusal in the one JSON error format, nothing journaled by a refusal or a query."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient
from typer.testing import CliRunner

from runplane.cli import app
from runplane.errors import RetryableError
from runplane.runs import operate
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.testing import Driver
from runplane.wire import Signal, UpdateAnswer
from services.admission.operate import HttpOperate
from tests.unit.test_updates import REGISTRY

PRINCIPALS = Principals.from_data(
    [
        {"name": "bob", "token_sha256": token_digest("b"), "roles": [], "tenant": "test"},
        {"name": "gil", "token_sha256": token_digest("g"), "roles": [], "tenant": "globex"},
    ]
)


class DriverTarget:
    """``operate.Asker`` over the Driver: the run's snapshot is the Driver's, an update is
    delivered to it and its answer read off the Driver's ``runs.updates``."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> Any | None:
        session = self.driver.sessions.get(key) if topic == "sessions" else None
        return None if session is None else session.snapshot

    def to_inbox(self, record: Signal) -> None:
        self.driver._inbox.append(record)
        self.driver._drain()

    def ask(self, record: Signal, *, timeout: float) -> UpdateAnswer:
        sent = len(self.driver.answers)
        self.to_inbox(record)
        for answer in self.driver.answers[sent:]:
            if answer.update_id == record.signal_id:
                return answer
        raise RetryableError(f"no answer to {record.signal_id} within {timeout}s")


def _setup(input: Any | None = None) -> tuple[TestClient, Driver, str]:
    driver = Driver(REGISTRY)
    run = driver.run("cart", input or {"max": 3})
    app = FastAPI()
    app.router.routes.extend(HttpOperate(PRINCIPALS, DriverTarget(driver), REGISTRY).routes())
    return TestClient(app), driver, run.session_id


def _post(http: TestClient, run: str, body: Any, token: str = "b") -> httpx.Response:
    return http.post(
        f"/runs/{run}/updates", json=body, headers={"Authorization": f"Bearer {token}"}
    )


def test_an_update_is_answered_over_http_with_the_token_as_sender() -> None:
    http, _driver, run = _setup()
    r = _post(http, run, {"name": "add_item", "payload": {"sku": "A"}, "update_id": "u-1"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "run_id": run,
        "name": "add_item",
        "update_id": "u-1",
        "answer": {"count": 1, "by": "bob"},  # the token's principal, never the body's
    }
    again = _post(http, run, {"name": "add_item", "payload": {"sku": "Z"}, "update_id": "u-1"})
    assert again.status_code == 200 and again.json()["answer"] == {"count": 1, "by": "bob"}


def test_a_refused_update_is_422_with_the_reason_and_leaves_no_record() -> None:
    http, driver, run = _setup()
    before = driver.view(run).journal
    r = _post(http, run, {"name": "add_item", "payload": {"qty": 2}})
    assert r.status_code == 422
    assert r.json()["refused"] == "invalid" and r.json()["detail"] == "an item names its sku"
    unknown = _post(http, run, {"name": "nope", "payload": {}})
    assert unknown.status_code == 422 and unknown.json()["refused"] == "unknown_update"
    assert driver.view(run).journal == before


@pytest.mark.parametrize(
    ("body", "token", "status", "code"),
    [
        ({"name": "add_item", "payload": {"sku": "A"}}, "g", 404, "unknown"),  # another tenant
        ({"name": "add_item", "payload": {"sku": "A"}}, "x", 401, None),
        ({"payload": {}}, "b", 400, "bad_request"),
        ({"name": "runplane.cancel"}, "b", 400, "bad_request"),
        ({"name": "add_item", "update_id": ""}, "b", 400, None),
        ({"name": "add_item", "wait_s": "soon"}, "b", 400, "bad_request"),
    ],
)
def test_bad_updates_are_refused_before_the_run_sees_them(
    body: Any, token: str, status: int, code: str | None
) -> None:
    http, driver, run = _setup()
    before = driver.view(run).journal
    r = _post(http, run, body, token)
    assert r.status_code == status, r.text
    assert "detail" in r.json()
    if code is not None:
        assert r.json()["refused"] == code
    assert driver.view(run).journal == before


def test_an_unknown_run_is_404_and_an_unanswered_update_504() -> None:
    http, driver, run = _setup({"max": 1, "wait_first": True})
    assert _post(http, "r-none", {"name": "add_item"}).status_code == 404
    r = _post(http, run, {"name": "add_item", "payload": {"sku": "A"}, "update_id": "u-1"})
    assert r.status_code == 504 and r.headers["Retry-After"] == "1"
    driver.signal(run, "open")  # now it asks: answered (the run ends with that answer)
    assert [a.update_id for a in driver.answers] == ["u-1"]


def test_a_query_answers_from_the_last_checkpoint_and_journals_nothing() -> None:
    http, driver, run = _setup()
    auth = {"Authorization": "Bearer b"}
    empty = http.get(f"/runs/{run}/queries/items", headers=auth)
    assert empty.status_code == 200 and empty.json() == {
        "run_id": run,
        "name": "items",
        "answer": [],
    }
    _post(http, run, {"name": "add_item", "payload": {"sku": "A"}})
    before = driver.view(run).journal
    r = http.get(f"/runs/{run}/queries/items", params={"args": "{}"}, headers=auth)
    assert r.status_code == 200 and r.json()["answer"] == ["A"]
    assert driver.view(run).journal == before
    assert http.get(f"/runs/{run}/queries/nope", headers=auth).json()["refused"] == "unknown_query"
    other = http.get(f"/runs/{run}/queries/items", headers={"Authorization": "Bearer g"})
    assert other.status_code == 404
    bad = http.get(f"/runs/{run}/queries/items", params={"args": "{"}, headers=auth)
    assert bad.status_code == 400


def test_the_http_client_returns_the_answer_and_raises_the_refusal() -> None:
    http, _driver, run = _setup()
    transport = httpx.MockTransport(lambda req: _relay(http, req))
    answered = operate.update_over_http(
        "http://admission",
        "b",
        run,
        {"name": "add_item", "payload": {"sku": "A"}},
        transport=transport,
    )
    assert answered.answer == {"count": 1, "by": "bob"} and answered.run_id == run
    with pytest.raises(operate.RunRefused) as refused:
        operate.update_over_http(
            "http://admission", "b", run, {"name": "add_item", "payload": {}}, transport=transport
        )
    assert refused.value.code == "invalid" and "sku" in refused.value.reason
    got = operate.query_over_http("http://admission", "b", run, "items", transport=transport)
    assert got == ["A"]


def _relay(http: TestClient, request: httpx.Request) -> httpx.Response:
    r = http.request(
        request.method,
        str(request.url.copy_with(scheme=None, host=None).raw_path.decode()),
        content=request.content,
        headers=dict(request.headers),
    )
    return httpx.Response(r.status_code, content=r.content, headers=r.headers)


def test_the_cli_prints_the_answer_and_refuses_in_one_line() -> None:
    _, driver, run = _setup()
    stop = threading.Event()
    application = FastAPI(routes=HttpOperate(PRINCIPALS, DriverTarget(driver), REGISTRY).routes())
    env = {
        "RUNPLANE_BOOTSTRAP_SERVERS": "127.0.0.1:1",  # the HTTP path never needs Kafka
        "RUNPLANE_WORKLIST_TOKEN": "b",
        "RUNPLANE_WORKLIST_TOKEN_FILE": "",
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "",
    }
    with run_http(application, "127.0.0.1", 0, stop) as server:
        url = f"http://127.0.0.1:{server.port}"
        ok = CliRunner().invoke(
            app,
            ["runs", "update", run, "add_item", "--payload", '{"sku": "A"}', "--url", url],
            env=env,
        )
        assert ok.exit_code == 0, ok.output
        assert json.loads(ok.output) == {"count": 1, "by": "bob"}
        bad = CliRunner().invoke(
            app, ["runs", "update", run, "add_item", "--payload", "{}", "--url", url], env=env
        )
        assert bad.exit_code == 2 and "refused (invalid)" in bad.output
        assert "an item names its sku" in bad.output
        asked = CliRunner().invoke(app, ["runs", "query", run, "items", "--url", url], env=env)
        assert asked.exit_code == 0 and json.loads(asked.output) == ["A"]
