"""Updates on the real broker (issue 33, item 5): an update answered end to end through
admission's HTTP endpoint and through the client (the executor's UpdateAnswer on
runs.updates), a refused update leaves no record in the run's journal, a duplicate update id
is answered once — with the first answer — and a query answers from the run's last
checkpoint without journaling anything."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.core.updates import QueryDecl, Update, UpdateDecl
from runplane.runs.client import Client
from runplane.runs.operate import RunRefused
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import JournalKind, RunStatus
from services.admission.operate import HttpOperate
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

REGISTRY = AgentRegistry()
PRINCIPALS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("a"), "roles": [], "tenant": "acme"},
        {"name": "gil", "token_sha256": token_digest("g"), "roles": [], "tenant": "globex"},
    ]
)


def check_item(payload: Any) -> str | None:
    if not isinstance(payload, dict) or not payload.get("sku"):
        return "an item names its sku"
    return None


def items_of(state: Any, args: Any) -> Any:
    return [] if state is None else state["items"]


@REGISTRY.agent(
    "cart",
    updates=[UpdateDecl("add_item", validate=check_item)],
    queries=[QueryDecl("items", items_of)],
)
async def cart(ctx: StepCtx, input: Any) -> Any:
    items: list[str] = []
    while len(items) < input["max"]:
        update: Update = await ctx.wait_update("add_item")
        items.append(update.payload["sku"])
        await ctx.checkpoint({"items": items})
        await ctx.answer(update, {"count": len(items), "by": update.sent_by})
    return items


def _records(settings: Settings, run_id: str) -> list[Any]:
    return list(chain_of(settings, run_id)[0])


def test_an_update_is_answered_through_http_and_the_client_refused_ones_leave_no_record(
    settings: Settings,
) -> None:
    own = ExecutorSettings(base=settings, agent_modules=())
    producer = plain_producer(settings)
    stop = threading.Event()
    started = time.monotonic()
    with (
        executor_thread(own, registry=REGISTRY),
        Client(settings) as client,
        Client(settings) as served_by,
    ):
        app = FastAPI(routes=HttpOperate(PRINCIPALS, served_by, REGISTRY).routes())
        with run_http(app, "127.0.0.1", 0, stop) as server:
            url = f"http://127.0.0.1:{server.port}"
            [run] = admit(producer, settings, "cart", [{"max": 3}], tenant="acme")
            wait_for(
                lambda: (
                    (s := sessions(settings).get(run.run_id)) is not None
                    and s.status is RunStatus.PARKED
                ),
                timeout_s=60,
            )
            with httpx.Client(base_url=url, timeout=40) as http:
                auth = {"Authorization": "Bearer a"}
                # 1. Answered end to end over HTTP; the sender is the token's principal.
                t0 = time.monotonic()
                r = http.post(
                    f"/runs/{run.run_id}/updates",
                    json={"name": "add_item", "payload": {"sku": "A"}, "update_id": "u-1"},
                    headers=auth,
                )
                http_ms = (time.monotonic() - t0) * 1000
                assert r.status_code == 200, r.text
                assert r.json()["answer"] == {"count": 1, "by": "ada"}
                # 2. Refused: 422 with the validator's reason, and the journal is unchanged.
                before = _records(settings, run.run_id)
                bad = http.post(
                    f"/runs/{run.run_id}/updates",
                    json={"name": "add_item", "payload": {"qty": 1}, "update_id": "u-bad"},
                    headers=auth,
                )
                assert bad.status_code == 422, bad.text
                assert bad.json() == {
                    "detail": "an item names its sku",
                    "refused": "invalid",
                    "run_status": None,
                }
                # Another tenant's principal cannot tell the run exists.
                other = http.post(
                    f"/runs/{run.run_id}/updates",
                    json={"name": "add_item", "payload": {"sku": "X"}},
                    headers={"Authorization": "Bearer g"},
                )
                assert other.status_code == 404
                # 3. The query answers from the last checkpoint.
                q = http.get(f"/runs/{run.run_id}/queries/items", headers=auth)
                assert q.status_code == 200 and q.json()["answer"] == ["A"]
            # 4. Through the client (on Kafka), and the duplicate id answered once.
            t0 = time.monotonic()
            second = client.update(
                run.run_id, "add_item", {"sku": "B"}, update_id="u-2", sent_by="bob"
            )
            client_ms = (time.monotonic() - t0) * 1000
            assert second == {"count": 2, "by": "bob"}
            again = client.update(
                run.run_id, "add_item", {"sku": "Z"}, update_id="u-2", sent_by="bob"
            )
            assert again == second  # the first answer, not a second handling
            with pytest.raises(RunRefused) as refused:
                client.update(run.run_id, "add_item", {}, sent_by="bob")
            assert refused.value.code == "invalid"
            assert client.query(run.run_id, "items", registry=REGISTRY) == ["A", "B"]
            third = client.update(run.run_id, "add_item", {"sku": "C"}, sent_by="bob")
            assert third["count"] == 3
            wait_for(
                lambda: (
                    (s := sessions(settings).get(run.run_id)) is not None
                    and s.status is RunStatus.COMPLETED
                ),
                timeout_s=60,
            )
            # An ended run takes no update; its query still answers.
            with pytest.raises(RunRefused) as ended:
                client.update(run.run_id, "add_item", {"sku": "D"}, sent_by="bob")
            assert ended.value.code == "ended"
            assert client.query(run.run_id, "items", registry=REGISTRY) == ["A", "B", "C"]
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    received = [r for r in records if r.kind is JournalKind.SIGNAL_RECEIVED]
    # Only the accepted updates, each once: no trace of u-bad, the unnamed refusal or the dup.
    ids = [r.attrs.get("signal_id") for r in received]
    assert ids[:2] == ["u-1", "u-2"] and len(ids) == 3
    answered = [r.attrs["update_id"] for r in records if r.family == "answer"]
    assert answered == ids
    assert not [r for r in before if r.attrs.get("signal_id") == "u-bad"]
    assert all(r.attrs.get("signal_id") != "u-bad" for r in records)
    print(
        f"\nupdate answered over HTTP in {http_ms:.0f} ms, through the client in "
        f"{client_ms:.0f} ms; whole test {time.monotonic() - started:.1f} s"
    )
