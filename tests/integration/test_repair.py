"""Repairing runs on the real broker: a run quarantined by a changed agent is resumed after
the fix and completes; a fork from seq N completes and both chains verify; erase refuses a
live run and leaves the chain verifiable with its bodies erased."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.core.repair import ERASED, RepairKind, RepairOrder
from runplane.journal.summary import RunSummary
from runplane.runs.read import read_run, verify_exit_code
from runplane.runs.repair import read_snapshot, send_order, write_fork
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import JournalKind, RunStatus, Signal
from services.executor.settings import ExecutorSettings
from services.journal.api import build_api
from services.journal.serve import KafkaRepairer, KafkaRunReader
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, read_topic, send
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

FIXED = AgentRegistry()  # the agent as first deployed, and again after the fix
CHANGED = AgentRegistry()  # a deploy that changed what the agent does first


@FIXED.agent("ledger", durability="replayable")
async def ledger(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    a = await ctx.observe("first", lambda: input["n"] * 2)
    go = await ctx.wait_signal("go")
    b = await ctx.observe("second", lambda: a + 1)
    return {"a": a, "b": b, "go": go}


@CHANGED.agent("ledger", durability="replayable")
async def ledger_changed(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    a = await ctx.observe("renamed", lambda: input["n"] * 2)
    return {"a": a}


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = read_snapshot(settings, run_id)
    return None if snap is None else snap.status


def _signal(settings: Settings, run_id: str, payload: Any) -> None:
    send(
        plain_producer(settings),
        settings,
        "runs.inbox",
        run_id,
        Signal(
            session_id=run_id,
            name="go",
            payload_json=json.dumps(payload),
            sent_ms=int(time.time() * 1000),
        ),
    )


def _await(settings: Settings, run_id: str, status: RunStatus) -> None:
    wait_for(lambda: _status(settings, run_id) is status, timeout_s=90, what=f"{run_id} {status}")


def _own(settings: Settings) -> ExecutorSettings:
    return ExecutorSettings(base=settings, agent_modules=())


def test_quarantined_run_resumed_after_fix_and_forked(settings: Settings) -> None:
    producer = plain_producer(settings)
    with executor_thread(_own(settings), registry=FIXED):
        [run] = admit(producer, settings, "ledger", [{"n": 20}])
        _await(settings, run.run_id, RunStatus.PARKED)
    with executor_thread(_own(settings), registry=CHANGED):
        _signal(settings, run.run_id, "early")  # its rebuild replays under the changed code
        _await(settings, run.run_id, RunStatus.QUARANTINED)
    ops = RepairOrder(RepairKind.RESUME, "ops-ada", "fixed in release 2")
    with executor_thread(_own(settings), registry=FIXED):
        send_order(settings, run.run_id, ops)
        _await(settings, run.run_id, RunStatus.PARKED)  # replayed to where it waited
        _signal(settings, run.run_id, "now")
        _await(settings, run.run_id, RunStatus.COMPLETED)
        records, results = chain_of(settings, run.run_id)
        assert verify_chain(records, results).ok
        kinds = [r.kind for r in records]
        assert kinds.count(JournalKind.RUN_QUARANTINED) == 1
        [resumed] = [r for r in records if r.attrs and r.attrs.get("repair") == "resume"]
        assert resumed.kind is JournalKind.RUN_RESUMED
        assert resumed.attrs == {
            "repair": "resume",
            "by": "ops-ada",
            "reason": "fixed in release 2",
            "from_status": "QUARANTINED",
        }
        assert resumed.seq == kinds.index(JournalKind.RUN_QUARANTINED) + 1
        snap = read_snapshot(settings, run.run_id)
        assert snap is not None and json.loads(snap.output_json or "null") == {
            "a": 40,
            "b": 41,
            "go": "now",
        }

        # Fork the completed run just after its first call: the fork replays that call from
        # the copied body, waits for its own signal and completes on its own chain.
        [first] = [r for r in records if r.kind is JournalKind.EFFECT_RECORDED][:1]
        fork_order = RepairOrder(RepairKind.FORK, "ops-ada", "rerun from the wait")
        fork_id = write_fork(settings, run.run_id, first.seq + 1, fork_order, signer=None)
        _await(settings, fork_id, RunStatus.PARKED)
        _signal(settings, fork_id, "again")
        _await(settings, fork_id, RunStatus.COMPLETED)
        forked, fork_results = chain_of(settings, fork_id)
        assert verify_chain(forked, fork_results).ok
        assert verify_chain(*chain_of(settings, run.run_id)).ok
        n = first.seq + 1
        for old, new in zip(records[:n], forked[:n], strict=True):
            assert (new.session_id, new.kind, new.attrs, new.body_digest) == (
                fork_id,
                old.kind,
                old.attrs,
                old.body_digest,
            )
        link = forked[n]
        assert link.kind is JournalKind.RUN_RESUMED and link.attrs is not None
        assert link.attrs["forked_from_run"] == run.run_id
        assert link.attrs["parent_head"] == records[-1].hash
        assert link.attrs["parent_at"] == records[n - 1].hash
        fork_snap = read_snapshot(settings, fork_id)
        assert fork_snap is not None
        assert json.loads(fork_snap.output_json or "null") == {"a": 40, "b": 41, "go": "again"}

        # Erase: refused for a live run (dead-lettered, nothing erased), applied to an ended one.
        [live] = admit(producer, settings, "ledger", [{"n": 1}])
        _await(settings, live.run_id, RunStatus.PARKED)
        send_order(settings, live.run_id, RepairOrder(RepairKind.ERASE, "ops-ada"))
        send_order(settings, run.run_id, RepairOrder(RepairKind.ERASE, "ops-ada", "GDPR 17"))
        wait_for(lambda: _erased(settings, run.run_id), timeout_s=90, what="erase of the ended run")
        letters = [r for _, r in read_topic(settings, "deadletter")]
        assert any(
            f"cannot erase run {live.run_id}: it is live" in getattr(d, "reason", "")
            for d in letters
        )
        assert _status(settings, live.run_id) is RunStatus.PARKED
        history = read_run(settings, run.run_id)
        *kept, erasure = history.records
        assert kept == records  # the chain is untouched, and extended by its erasure
        assert erasure.kind is JournalKind.RUN_ERASED and erasure.attrs == {
            "repair": "erase",
            "by": "ops-ada",
            "reason": "GDPR 17",
            "bodies": str(len(results)),
        }
        assert set(history.bodies) == set(results)
        assert all(body is None for body in history.bodies.values())  # every body tombstoned
        assert verify_chain(list(history.records), history.bodies).ok
        code, report = verify_exit_code(history)
        assert code == 0 and len(report["body_missing"]) == len(results)  # "bodies erased"


def _erased(settings: Settings, run_id: str) -> bool:
    snap = read_snapshot(settings, run_id)
    return snap is not None and snap.error is not None and snap.error.type == ERASED


@FIXED.agent("quick", durability="replayable")
async def quick(ctx: StepCtx, input: dict[str, Any]) -> int:
    return int(await ctx.observe("n", lambda: input["n"]))


def test_results_of_ended_runs_expire_after_the_retention(settings: Settings) -> None:
    own = ExecutorSettings(base=settings, agent_modules=(), results_retention_s=1.0)
    producer = plain_producer(settings)
    with executor_thread(own, registry=FIXED):
        [done] = admit(producer, settings, "quick", [{"n": 3}])
        [parked] = admit(producer, settings, "ledger", [{"n": 4}])
        _await(settings, done.run_id, RunStatus.COMPLETED)
        _await(settings, parked.run_id, RunStatus.PARKED)
        wait_for(lambda: _erased(settings, done.run_id), timeout_s=60, what="retention")
    history = read_run(settings, done.run_id)
    assert history.bodies and all(body is None for body in history.bodies.values())
    assert verify_chain(list(history.records), history.bodies).ok
    live = read_run(settings, parked.run_id)
    assert live.bodies and all(body is not None for body in live.bodies.values())
    # an executor restored after the retention finds nothing more to expire for the ended
    # run and keeps the parked one's bodies
    with executor_thread(own, registry=FIXED) as executor:
        [part] = [
            executor._table.parts[p]
            for p in executor._table.parts
            if parked.run_id in executor._table.parts[p].sessions
        ]
        assert part.results_of(parked.run_id)
        assert all(
            e.erased.session_id != done.run_id
            for p in executor._table.parts.values()
            for e in p.expiring
        )


class _Index:
    """The run index as far as the repair routes need it (Redis is not under test here)."""

    def __init__(self, *run_ids: str) -> None:
        self.runs = {r: RunSummary(r, status=RunStatus.COMPLETED, tenant="acme") for r in run_ids}

    def get(self, run_id: str) -> RunSummary | None:
        return self.runs.get(run_id)


def test_an_operator_forks_and_erases_through_the_journal_api(settings: Settings) -> None:
    people = Principals.from_data(
        [
            {
                "name": "ops",
                "token_sha256": token_digest("o"),
                "roles": ["operator"],
                "tenant": "acme",
            }
        ]
    )
    producer = plain_producer(settings)
    stop = threading.Event()
    with executor_thread(_own(settings), registry=FIXED):
        [done] = admit(producer, settings, "quick", [{"n": 5}])
        _await(settings, done.run_id, RunStatus.COMPLETED)
        api = build_api(
            lambda: _Index(done.run_id),  # type: ignore[arg-type,return-value]
            KafkaRunReader(settings),
            people,
            ui=False,
            repairer=KafkaRepairer(settings),
        )
        auth = {"Authorization": "Bearer o"}
        with (
            run_http(api, "127.0.0.1", 0, stop) as server,
            httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as http,
        ):
            resumed = http.post(f"/runs/{done.run_id}/resume", json={}, headers=auth)
            assert resumed.status_code == 409  # a completed run is not resumed
            forked = http.post(f"/runs/{done.run_id}/fork", json={"from_seq": 2}, headers=auth)
            assert forked.status_code == 202, forked.text
            fork_id = forked.json()["fork_id"]
            _await(settings, fork_id, RunStatus.COMPLETED)
            erased = http.post(f"/runs/{done.run_id}/erase", json={"reason": "t"}, headers=auth)
            assert erased.status_code == 202, erased.text
            wait_for(lambda: _erased(settings, done.run_id), timeout_s=60, what="erase")
        stop.set()
    records, _ = chain_of(settings, fork_id)
    assert records[2].attrs["by"] == "ops" and records[2].attrs["forked_from_run"] == done.run_id
    assert verify_chain(*chain_of(settings, fork_id)).ok
