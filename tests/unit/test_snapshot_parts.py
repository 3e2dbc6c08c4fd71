"""Each family's part of a run's state (``table.Part``, in its registry row): carried by
``SessionSnapshot.parts`` and, this release, by the older fields too; read from ``parts``
first, from the older fields when a snapshot has none (one written before ``parts``)."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, AgentSpec, Durability, StepCtx
from runplane.core.effect import EffectError, Op, RunCancelled
from runplane.core.engine import registry, table
from runplane.core.engine.operated import CANCEL, CancelRequest
from runplane.core.engine.registry import FAMILIES, Family, part_table
from runplane.core.engine.signals import SIGNAL_IDS
from runplane.core.engine.state import Mark, Run, run_from_snapshot
from runplane.core.engine.table import Part
from runplane.core.engine.timeouts import TIMER
from runplane.core.engine.vocab import Resolution, Slot
from runplane.testing import Driver
from runplane.wire import (
    JournalKind,
    RunStatus,
    SessionSnapshot,
    decode,
    encode,
    register_writer_schema,
    to_dict,
)


def _spec(fn: Any) -> AgentSpec:
    return AgentRegistry().register(AgentSpec("t", fn, Durability.REPLAYABLE, None, {}), lint=False)


async def _cleans_up(ctx: StepCtx, input: Any) -> Any:
    got = await ctx.wait_signal("go")
    try:
        await ctx.sleep(60)
    except RunCancelled:
        await ctx.sleep(30)  # clean-up: parked on a timer with the cancel held
    return got


def _cancelled_in_clean_up() -> Driver:
    """A run parked in its clean-up: its timer armed, one signal id accepted, a cancel held —
    every operate part away from its default."""
    driver = Driver(_spec(_cleans_up))
    driver.run("t", {}, session_id="s")
    driver.signal("s", "go", {"n": 1}, signal_id="sig-1", sent_by="ada")
    driver.cancel("s", "stop", by="op")
    assert driver.view("s").status is RunStatus.PARKED
    return driver


def _older(snapshot: SessionSnapshot) -> SessionSnapshot:
    """``snapshot`` as an executor before ``parts`` wrote it: the older fields only."""
    return dataclasses.replace(snapshot, parts={})


def _restored(driver: Driver, snapshot: SessionSnapshot) -> Run:
    results = driver.sessions[snapshot.session_id].results
    return run_from_snapshot(_spec(_cleans_up), snapshot, results, calendars=None, tools=None)


def test_a_snapshot_carries_each_part_in_parts_and_in_the_older_fields() -> None:
    snap = _cancelled_in_clean_up().view("s").snapshot
    assert set(snap.parts) == {"timer", "signal_ids", "cancel"}
    assert snap.wake_at_ms is not None and int(snap.parts["timer"]) == snap.wake_at_ms
    assert snap.signal_ids == ("sig-1",) and json.loads(snap.parts["signal_ids"]) == ["sig-1"]
    assert snap.cancel_json is not None and snap.parts["cancel"] == snap.cancel_json


def test_a_snapshot_written_before_parts_restores_identically() -> None:
    driver = _cancelled_in_clean_up()
    snap = driver.view("s").snapshot
    expected = {
        "timer": snap.wake_at_ms,
        "signal_ids": ("sig-1",),
        "cancel": CancelRequest.from_json(str(snap.cancel_json)),
    }
    assert _restored(driver, snap).parts == expected
    assert _restored(driver, _older(snap)).parts == expected

    # The rest of the run, rebuilt once from the newer snapshot and once from the older one.
    ends = []
    for restore_from in (snap, _older(snap)):
        again = _cancelled_in_clean_up()
        again.crash("s")
        again.sessions["s"].snapshot = restore_from
        again.advance(31_000)
        ends.append(again.view("s"))
    newer, older = ends
    assert newer.journal[-1].kind is JournalKind.RUN_CANCELLED
    assert older.journal == newer.journal and older.snapshot == newer.snapshot
    assert older.snapshot.parts == {"signal_ids": '["sig-1"]', "cancel": snap.parts["cancel"]}


def test_a_snapshot_round_trips_the_wire_and_a_restore() -> None:
    driver = _cancelled_in_clean_up()
    snap = driver.view("s").snapshot
    assert decode(encode(snap)) == snap
    assert _restored(driver, decode(encode(snap))).capture().build() == snap


def _schema_without_parts() -> dict[str, Any]:
    schema = json.loads(SessionSnapshot.avro_schema_json())
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "parts"]
    return dict(schema)


def test_older_and_newer_executors_read_each_others_snapshots() -> None:
    snap = _cancelled_in_clean_up().view("s").snapshot
    older_schema = _schema_without_parts()
    older = parse_schema(older_schema)

    # An older executor's bytes: no parts; the newer reader fills {} and restores as before.
    body = io.BytesIO()
    old_fields = {k: v for k, v in to_dict(snap).items() if k != "parts"}
    schemaless_writer(body, older, old_fields)
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(older), "CRC-64-AVRO"))
    assert register_writer_schema(json.dumps(older_schema)) == fp
    read = decode(b"\xc3\x01" + fp + body.getvalue())
    assert isinstance(read, SessionSnapshot) and read == _older(snap)

    # A newer executor's bytes read by an older one (a rolling upgrade): parts dropped, and
    # the older fields still say what the parts say.
    newer = parse_schema(json.loads(SessionSnapshot.avro_schema_json()))
    framed = encode(snap)
    seen = schemaless_reader(io.BytesIO(framed[10:]), newer, older)
    assert isinstance(seen, dict) and "parts" not in seen
    assert (seen["wake_at_ms"], seen["signal_ids"], seen["cancel_json"]) == (
        snap.wake_at_ms,
        list(snap.signal_ids),
        snap.cancel_json,
    )


def test_a_part_at_its_default_is_absent_and_reads_back_as_the_default() -> None:
    driver = Driver(_spec(_cleans_up))
    snap = driver.run("t", {}, session_id="s").snapshot
    assert snap.parts == {} and snap.wake_at_ms is None and snap.signal_ids == ()
    run = _restored(driver, snap)
    assert run.parts == {}
    assert (TIMER.of(run), SIGNAL_IDS.of(run), CANCEL.of(run)) == (None, (), None)


@pytest.mark.parametrize("part", list(table.PARTS.values()), ids=list(table.PARTS))
def test_every_part_reads_its_default_from_the_older_fields_defaults(part: Part[Any]) -> None:
    bare = _older(Driver(_spec(_cleans_up)).run("t", {}, session_id="s").snapshot)
    assert part.read(bare) == part.default
    if part.write_old is not None:
        # The fields it writes at its default are those fields' own defaults.
        assert dataclasses.replace(bare, **part.write_old(part.default)) == bare


@given(due=st.none() | st.integers(0, 2**62), ids=st.lists(st.text(min_size=1), max_size=5))
def test_a_part_into_a_snapshot_reads_back(due: int | None, ids: list[str]) -> None:
    bare = _older(Driver(_spec(_cleans_up)).run("t", {}, session_id="s").snapshot)
    snap = SIGNAL_IDS.into(TIMER.into(bare, due), tuple(ids))
    assert (TIMER.read(snap), SIGNAL_IDS.read(snap)) == (due, tuple(ids))
    assert (snap.wake_at_ms, snap.signal_ids) == (due, tuple(ids))  # the older fields too
    assert ("timer" in snap.parts) == (due is not None)
    cleared = TIMER.into(snap, None)
    assert (TIMER.read(cleared), cleared.wake_at_ms, "timer" in cleared.parts) == (
        None,
        None,
        False,
    )


# A part a new family declares in its row, and nothing else: state.py names none of it.
QUEUE: Part[tuple[str, ...]] = Part(
    "queue", (), encode=lambda items: json.dumps(list(items)), decode=lambda t: tuple(json.loads(t))
)


def test_a_new_family_adds_its_part_in_its_row_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Family("queues", {}, parts=(QUEUE,))
    parts = part_table((*FAMILIES, row))
    assert parts["queue"] is QUEUE and set(parts) == {*table.PARTS, "queue"}
    for name, part in parts.items():
        monkeypatch.setitem(table.PARTS, name, part)

    driver = _cancelled_in_clean_up()
    run = _restored(driver, driver.view("s").snapshot)
    QUEUE.put(run, ("a", "b"))
    snap = run.capture().build()
    assert snap.parts["queue"] == '["a", "b"]'
    again = _restored(driver, snap)
    assert QUEUE.of(again) == ("a", "b") and TIMER.of(again) == snap.wake_at_ms
    assert QUEUE.of(_restored(driver, _older(snap))) == ()  # no older field: its default


def test_a_part_name_has_one_owner() -> None:
    with pytest.raises(AssertionError, match="two owners"):
        part_table(
            (*FAMILIES, Family("clock", {}, parts=(dataclasses.replace(QUEUE, name="timer"),)))
        )


def test_an_undo_mark_puts_every_part_back() -> None:
    driver = _cancelled_in_clean_up()
    run = _restored(driver, driver.view("s").snapshot)
    before = dict(run.parts)
    mark = Mark.take(run)
    TIMER.put(run, None)
    SIGNAL_IDS.put(run, ("x",))
    CANCEL.put(run, None)
    mark.restore(run)
    assert run.parts == before
    TIMER.put(run, 1)  # the mark holds its own copy: a second restore is the same
    mark.restore(run)
    assert run.parts == before


def test_a_handler_raising_halfway_leaves_no_part_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    def half_a_sleep(run: Run, slot: Slot) -> Resolution:
        TIMER.put(run, 123)
        SIGNAL_IDS.put(run, (*SIGNAL_IDS.of(run), "half"))
        raise ValueError("the handler broke after setting its parts")

    monkeypatch.setitem(registry.HANDLERS, Op.SLEEP, half_a_sleep)  # type: ignore[index]

    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.wait_signal("go")
        try:
            await ctx.sleep(60)
        except EffectError as exc:
            return exc.type
        return "slept"

    driver = Driver(_spec(agent))
    driver.run("t", {}, session_id="s")
    done = driver.signal("s", "go", {}, signal_id="sig-1")
    assert done.status is RunStatus.COMPLETED and done.output == "InvalidRequest"
    assert done.snapshot.parts == {"signal_ids": '["sig-1"]'} and done.snapshot.wake_at_ms is None
