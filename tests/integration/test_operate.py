"""Operating runs on the real broker: a run waiting on signals completes when they are sent
and a redelivered signal id changes nothing; a cancel mid-run unwinds the run (its effect
group's compensation runs) and leaves no announced call without a disposition; a sleeping run
wakes on time after the executor that owned it is SIGKILLed while it sleeps."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from executor_process_support import ExecutorProcess

from runplane.config import Settings
from runplane.core import AgentRegistry, AgentSpec, EffectDecl, Recovery, StepCtx, verify_chain
from runplane.core.effect import EffectError
from runplane.kafka.topics import create_topics
from runplane.providers import FunctionTool
from runplane.runs.client import Client
from runplane.runs.operate import RunRefused
from runplane.wire import JournalKind, RunStatus, SessionSnapshot, Signal
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("examples.operate",)


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def _redeliver(
    client: Client, run_id: str, name: str, payload_json: str, signal_id: str, by: str
) -> None:
    """Produce a signal straight to the inbox again, as a sender's retry or Kafka would."""
    record = Signal(
        session_id=run_id,
        name=name,
        payload_json=payload_json,
        sent_ms=0,
        signal_id=signal_id,
        sent_by=by,
    )
    client.to_inbox(record)


def _unanswered(records: list[object]) -> set[tuple[int, int | None]]:
    """Announced calls with no outcome in the chain (era, call_seq)."""
    announced = {(r.era, r.call_seq) for r in records if r.kind is JournalKind.EFFECT_ANNOUNCED}  # type: ignore[attr-defined]
    answered = {
        (r.era, r.call_seq)  # type: ignore[attr-defined]
        for r in records
        if r.kind in (JournalKind.EFFECT_RECORDED, JournalKind.EFFECT_IN_DOUBT)  # type: ignore[attr-defined]
    }
    return announced - answered


def test_signals_complete_a_waiting_run_and_a_redelivered_id_changes_nothing(
    settings: Settings,
) -> None:
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    producer = plain_producer(settings)
    with executor_thread(own), Client(settings) as client:
        [run] = admit(producer, settings, "tally", [{"count": 2}], tenant="acme")
        wait_for(lambda: _status(settings, run.run_id) is RunStatus.PARKED, timeout_s=60)
        with pytest.raises(RunRefused) as other:
            client.signal(run.run_id, "vote", "x", sent_by="eve", tenant="globex")
        assert other.value.code == "unknown"
        first = client.signal(run.run_id, "vote", "yes", signal_id="v-1", sent_by="ada")
        assert first.run_id == run.run_id and first.signal_id == "v-1"
        # A redelivery of the same id (a sender's retry): produced again, as Kafka may.
        _redeliver(client, run.run_id, "vote", '"again"', "v-1", "ada")
        client.signal(run.run_id, "vote", "no", signal_id="v-2", sent_by="bob", tenant="acme")
        wait_for(lambda: _status(settings, run.run_id) is RunStatus.COMPLETED, timeout_s=60)
        snap = sessions(settings)[run.run_id]
        assert snap.output_json == '{"votes":["yes","no"]}'
        with pytest.raises(RunRefused) as ended:
            client.signal(run.run_id, "vote", "late", sent_by="ada")
        assert ended.value.code == "ended" and ended.value.status is RunStatus.COMPLETED
        with pytest.raises(RunRefused) as unknown:
            client.signal("r-nosuchrun", "vote", "x", sent_by="ada")
        assert unknown.value.code == "unknown"
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    received = [r for r in records if r.kind is JournalKind.SIGNAL_RECEIVED]
    assert [(r.attrs["signal_id"], r.attrs["sent_by"]) for r in received] == [
        ("v-1", "ada"),
        ("v-2", "bob"),
    ]


def test_cancel_unwinds_a_waiting_run_and_leaves_no_call_without_a_disposition(
    settings: Settings,
) -> None:
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    producer = plain_producer(settings)
    with executor_thread(own), Client(settings) as client:
        [run] = admit(producer, settings, "await_payment", [{"sku": "lamp"}], tenant="acme")
        wait_for(lambda: _status(settings, run.run_id) is RunStatus.PARKED, timeout_s=60)
        client.cancel(run.run_id, reason="customer withdrew", sent_by="ops", request_id="c-1")
        # A redelivery of the same request (the run may already have ended: then it is
        # dead-lettered; either way nothing more is journaled).
        _redeliver(client, run.run_id, "runplane.cancel", '{"reason":"again"}', "c-1", "ops")
        wait_for(lambda: _status(settings, run.run_id) is RunStatus.FAILED, timeout_s=60)
        snap = sessions(settings)[run.run_id]
        assert snap.error is not None and snap.error.type == "RunCancelled"
        with pytest.raises(RunRefused) as late:  # a retry once it ended is refused, not sent
            client.cancel(run.run_id, reason="again", sent_by="ops", request_id="c-1")
        assert late.value.code == "ended"
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    kinds = [r.kind for r in records]
    assert kinds.count(JournalKind.CANCEL_REQUESTED) == 1
    assert kinds[-1] is JournalKind.RUN_CANCELLED
    assert records[-1].attrs["cancelled_by"] == "ops"
    assert "tool://release_stock" in {
        r.name for r in records if r.kind is JournalKind.EFFECT_RECORDED
    }
    assert _unanswered(list(records)) == set()


def _executor(settings: Settings, instance: str, logs: Path) -> ExecutorProcess:
    modules = {"RUNPLANE_AGENT_MODULES": ",".join(MODULES), "RUNPLANE_TOOLS_CONFIG": None}
    return ExecutorProcess(settings, instance, logs, modules)


def test_a_sleeping_run_wakes_on_time_after_its_executor_is_killed(
    settings: Settings, tmp_path: Path
) -> None:
    producer = plain_producer(settings)
    first = _executor(settings, "a", tmp_path)
    second: ExecutorProcess | None = None
    try:
        # Long enough to kill the executor while the run sleeps, even on a loaded machine.
        [run] = admit(producer, settings, "nap", [{"seconds": 15}], tenant="acme")
        seen: list[SessionSnapshot] = []

        def parked() -> bool:
            snap = sessions(settings).get(run.run_id)
            seen[:] = [] if snap is None else [snap]
            return snap is not None and snap.status is RunStatus.PARKED

        wait_for(parked, timeout_s=90, what="the run to sleep")
        [asleep] = seen
        assert asleep.wake_at_ms is not None
        first.kill()  # SIGKILL while it sleeps: nothing of the timer lives in the process
        first.proc.wait(10)
        second = _executor(settings, "b", tmp_path)
        wait_for(lambda: _status(settings, run.run_id) is RunStatus.COMPLETED, timeout_s=120)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    done = sessions(settings)[run.run_id]
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    [park] = [r for r in records if r.kind is JournalKind.RUN_PARKED]
    woke = int(park.attrs["wake_at"])
    assert woke == asleep.wake_at_ms
    # On time: never before the journaled instant, and the value is the instant, not a clock.
    assert done.output_json is not None and f'"woke_ms":{woke}' in done.output_json
    [recorded] = [r for r in records if r.kind is JournalKind.EFFECT_RECORDED]
    assert recorded.stamp_ms >= woke and recorded.attrs["wake_at"] == str(woke)
    # Reported, not asserted (no timed assertions): how late the second executor woke it.
    print(f"timer lateness after SIGKILL + a new executor: {recorded.stamp_ms - woke} ms")


@pytest.fixture
def one_partition(empty_settings: Settings, admin_client: AdminClient) -> Settings:
    """Every run on one partition: the oversized result and the runs after it share it."""
    narrow = dataclasses.replace(empty_settings, partitions=1)
    create_topics(narrow, admin_client)
    return narrow


def test_a_result_larger_than_a_kafka_message_fails_its_call_and_the_partition_moves_on(
    one_partition: Settings,
) -> None:
    settings = one_partition

    async def fetch(ctx: StepCtx, input: dict[str, Any]) -> Any:
        try:
            body = await ctx.tool("blob", {"bytes": input["bytes"]})
        except EffectError as exc:
            return {"refused": exc.type}
        return {"len": len(body)}

    registry = AgentRegistry()
    registry.register(AgentSpec("fetch", fetch, tools=frozenset({"blob"})), lint=False)
    blob = FunctionTool(
        "blob",
        lambda bytes: "x" * int(bytes),
        decl=EffectDecl("blob", mutating=False, recovery=Recovery.RETRY),
    )
    own = ExecutorSettings(base=settings, agent_modules=())
    producer = plain_producer(settings)
    with executor_thread(own, tools={"blob": blob}, registry=registry):
        # 2 MiB: over the broker's message.max.bytes (1 MiB by default) and max_result_bytes.
        big, *small = admit(
            producer, settings, "fetch", [{"bytes": 2 * 1024 * 1024}, {"bytes": 10}, {"bytes": 20}]
        )
        ids = [big.run_id, *(r.run_id for r in small)]
        wait_for(
            lambda: all(_status(settings, i) is RunStatus.COMPLETED for i in ids),
            timeout_s=90,
            what="every run on the partition to complete",
        )
    rows = sessions(settings)
    assert rows[big.run_id].output_json == '{"refused":"ResultTooLarge"}'
    assert [rows[r.run_id].output_json for r in small] == ['{"len":10}', '{"len":20}']
    records, results = chain_of(settings, big.run_id)
    assert verify_chain(records, results).ok
    assert results[(0, 0)].error is not None and results[(0, 0)].value_json is None


def test_continue_as_new_hands_over_to_a_linked_successor_in_one_transaction(
    settings: Settings,
) -> None:
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    producer = plain_producer(settings)
    with executor_thread(own):
        [run] = admit(producer, settings, "countdown", [{"n": 2}], tenant="acme")
        ids = [run.run_id, f"{run.run_id}.n1", f"{run.run_id}.n2"]
        wait_for(
            lambda: all(_status(settings, i) is RunStatus.COMPLETED for i in ids),
            timeout_s=90,
            what="three generations",
        )
    rows = sessions(settings)
    assert [rows[i].output_json for i in ids] == [
        f'{{"continued_as":"{ids[1]}"}}',
        f'{{"continued_as":"{ids[2]}"}}',
        '{"done":true}',
    ]
    for before, after in itertools.pairwise(ids):
        old, old_results = chain_of(settings, before)
        new, new_results = chain_of(settings, after)
        assert verify_chain(old, old_results).ok and verify_chain(new, new_results).ok
        assert old[-1].attrs["continued_as"] == after
        assert new[0].attrs["continued_from"] == before
        assert new[0].attrs["predecessor_hash"] == old[-2].hash
        assert rows[after].tenant == "acme" and rows[after].admission_key.endswith("/next")


def test_the_cli_signals_and_cancels_and_refuses_with_exit_2(settings: Settings) -> None:
    """Outside dev mode through admission's endpoints with a token (the journaled sender is
    its principal, not RUNPLANE_INITIATOR); in dev mode on Kafka, as ``--as`` names."""
    import threading

    from typer.testing import CliRunner

    from runplane.cli import app
    from runplane.serving.auth import Principals, token_digest
    from runplane.serving.health import Health
    from runplane.serving.shell import run_http
    from services.admission.http import HttpAdmission
    from services.admission.identity import Authentication
    from services.admission.operate import HttpOperate
    from services.admission.serve import http_app

    env = {
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_INITIATOR": "ops-cli",
        "RUNPLANE_WORKLIST_TOKEN": "",
        "RUNPLANE_WORKLIST_TOKEN_FILE": "",
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "",
    }
    dev = {**env, "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true"}
    ops = Principals.from_data(
        [{"name": "ops-ada", "token_sha256": token_digest("t-ada"), "roles": ["operator"]}]
    )
    ada = {**env, "RUNPLANE_WORKLIST_TOKEN": "t-ada"}
    cli = CliRunner()
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    producer = plain_producer(settings)
    stop = threading.Event()
    with (
        executor_thread(own),
        Client(settings) as target,
        run_http(
            http_app(Health(), HttpAdmission(Authentication(), target), HttpOperate(ops, target)),
            "127.0.0.1",
            0,
            stop,
        ) as server,
    ):
        url = ["--url", f"http://127.0.0.1:{server.port}"]
        done, waiting = admit(
            producer, settings, "tally", [{"count": 1}, {"count": 1}], tenant="default"
        )
        ids = (done.run_id, waiting.run_id)
        wait_for(lambda: all(_status(settings, i) is RunStatus.PARKED for i in ids), timeout_s=60)
        vote = ["signal", done.run_id, "vote", "--payload", '"aye"']
        refused = cli.invoke(app, vote, env=env)  # no identity, not dev mode: nothing sent
        assert refused.exit_code == 2 and "no identity" in refused.output
        sent = cli.invoke(app, vote, env=dev)
        assert sent.exit_code == 0, sent.output
        wait_for(lambda: _status(settings, done.run_id) is RunStatus.COMPLETED, timeout_s=60)
        late = cli.invoke(app, ["signal", done.run_id, "vote", *url], env=ada)
        assert late.exit_code == 2 and "ended" in late.output
        cancel = ["runs", "cancel", waiting.run_id, "--reason", "test over", *url]
        forged = cli.invoke(app, cancel, env={**env, "RUNPLANE_WORKLIST_TOKEN": "t-eve"})
        assert forged.exit_code == 2 and "unauthenticated" in forged.output
        assert cli.invoke(app, cancel, env=ada).exit_code == 0
        wait_for(lambda: _status(settings, waiting.run_id) is RunStatus.FAILED, timeout_s=60)
        unknown = cli.invoke(app, ["runs", "cancel", "r-nosuch", "--reason", "x", *url], env=ada)
        assert unknown.exit_code == 2 and "unknown" in unknown.output
    records, _ = chain_of(settings, waiting.run_id)
    assert records[-1].attrs["cancelled_by"] == "ops-ada"  # the token's, not RUNPLANE_INITIATOR
    signals = [
        r for r in chain_of(settings, done.run_id)[0] if r.kind is JournalKind.SIGNAL_RECEIVED
    ]
    assert [r.attrs.get("sent_by") for r in signals] == ["ops-cli"]  # dev mode: as named


def test_a_run_admitted_through_admission_is_signalled_by_its_admission_key(
    settings: Settings,
) -> None:
    from test_admission import running

    from runplane.core.agents import import_agent_modules
    from services.admission.serve import build, capabilities_from
    from services.admission.settings import AdmissionSettings

    caps = capabilities_from(import_agent_modules(MODULES))
    admission = build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=caps)
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    key = f"order-{settings.instance_id}"
    with running(admission), executor_thread(own), Client(settings) as client:
        reply = client.admit("tally", key, {"count": 1}, tenant="acme", initiator="emitter")
        assert reply.run_id is not None
        run_id = reply.run_id
        wait_for(lambda: _status(settings, run_id) is RunStatus.PARKED, timeout_s=60)
        sent = client.signal(key, "vote", "by key", sent_by="ada", tenant="acme")
        assert sent.run_id == run_id
        done = client.wait(run_id, timeout=60)
    assert done.status is RunStatus.COMPLETED and done.output_json == '{"votes":["by key"]}'
