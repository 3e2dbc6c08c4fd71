"""Replay testing of recorded journals against new code (runplane.core.engine.replaytest): OK for
unchanged code, the exact first divergence (position, both requests) for a changed call, OK
for a run in flight that the new code reaches consistently."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.engine import ReplayResult, attach_requests, replay_recording
from runplane.core.recording import (
    Recording,
    RecordingError,
    dump_recordings,
    load_recordings,
)
from runplane.testing import Driver, FakeClock, RunView

GOLDEN = Path(__file__).parents[1] / "replay" / "golden"


def _tools() -> dict[str, Any]:
    return {
        "lookup": lambda args, key: {"n": len(args["q"])},
        "write": lambda args, key: {"ok": True},
    }


def _spec(variant: str) -> AgentSpec:
    reg = AgentRegistry()

    @reg.agent("flow", tools=["lookup", "write"])
    async def flow(ctx: StepCtx, value: dict[str, Any]) -> dict[str, Any]:
        found = await ctx.tool("lookup", {"q": value["q"]})
        if variant == "v2":  # a changed request at the second call
            await ctx.tool("write", {"n": found["n"], "extra": True})
        else:
            await ctx.tool("write", {"n": found["n"]})
        decision = await ctx.approval("go on?", {"n": found["n"]}, role="ops")
        if variant == "longer":
            await ctx.tool("lookup", {"q": "again"})
        return {"n": found["n"], "approved": decision.approved}

    return reg.spec("flow")


def _record(decide: bool = True) -> Recording:
    driver = Driver(_spec("v1"), tools=_tools(), clock=FakeClock(1_700_000_000_000, step_ms=5))
    run: RunView = driver.run("flow", {"q": "abc"}, session_id="s-flow")
    if decide:
        run = driver.decide(run.session_id, "APPROVED", by=("bob",))
    return Recording(run.snapshot, run.journal, run.results)


def test_unchanged_code_replays_ok_for_an_ended_and_an_in_flight_run() -> None:
    for rec in (_record(), _record(decide=False)):
        report = replay_recording(_spec("v1"), rec)
        assert report.result is ReplayResult.OK, report
        assert report.replayed >= 2


def test_a_changed_call_reports_the_first_divergence_with_both_requests() -> None:
    rec = attach_requests(_spec("v1"), _record())  # the export attaches recorded bodies
    report = replay_recording(_spec("v2"), rec)
    assert report.result is ReplayResult.DIVERGED
    d = report.divergence
    assert d is not None and (d.era, d.call_seq) == (0, 1)
    assert d.recorded is not None and d.recorded.request["args"] == {"n": 3}
    assert d.issued is not None and d.issued.request["args"] == {"n": 3, "extra": True}
    assert '+      "extra": true,' in d.diff(), d.diff()
    assert "non-determinism at era 0 call_seq 1" in d.reason


def test_without_attached_bodies_the_recorded_side_names_the_witness() -> None:
    report = replay_recording(_spec("v2"), _record())
    d = report.divergence
    assert d is not None and d.recorded is not None
    assert "request" not in d.recorded.to_json() and d.recorded.name.endswith("write")


def test_an_in_flight_run_diverging_before_its_park_is_reported() -> None:
    report = replay_recording(_spec("v2"), _record(decide=False))
    assert report.result is ReplayResult.DIVERGED
    assert report.divergence is not None and report.divergence.call_seq == 1


def test_new_code_issuing_more_calls_than_an_ended_run_diverges() -> None:
    report = replay_recording(_spec("longer"), _record())
    assert report.result is ReplayResult.DIVERGED
    d = report.divergence
    assert d is not None and d.recorded is None and d.issued is not None
    assert d.issued.request["args"] == {"q": "again"}
    # In flight, the same code is fine: the run has not got there yet.
    assert replay_recording(_spec("longer"), _record(decide=False)).ok


def test_a_tampered_recording_is_broken_and_nothing_replays() -> None:
    rec = _record()
    bad = Recording(rec.snapshot, rec.journal[:2] + rec.journal[3:], rec.results)
    assert replay_recording(_spec("v1"), bad).result is ReplayResult.BROKEN
    other_input = Recording(
        replace(rec.snapshot, input_json='{"q": "zzz"}'),
        rec.journal,
        rec.results,
    )
    assert replay_recording(_spec("v1"), other_input).result is ReplayResult.BROKEN
    assert replay_recording(None, rec).result is ReplayResult.MISSING


def test_export_files_round_trip_and_golden_journals_load() -> None:
    rec = attach_requests(_spec("v1"), _record())
    again = load_recordings(dump_recordings([rec]))
    assert again == [rec] and not again[0].problems()
    golden = load_recordings((GOLDEN / "refund_approved.json").read_text(encoding="utf-8"))
    assert golden[0].capability == "refund" and not golden[0].problems()
    with pytest.raises(RecordingError):
        load_recordings('{"format": "other"}')


def test_the_cli_replays_a_folder_and_fails_on_a_tampered_file(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from runplane.cli import app
    from runplane.config import DEFAULT_AGENT_MODULES

    # The goldens' agents, named as a deployment names them (not whatever other tests imported).
    modules = ",".join((*DEFAULT_AGENT_MODULES, "examples.plan_triage"))
    runner = CliRunner(env={"RUNPLANE_AGENT_MODULES": modules})
    ok = runner.invoke(app, ["replay", str(GOLDEN), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] == len(list(GOLDEN.glob("*.json")))
    data = json.loads((GOLDEN / "refund_approved.json").read_text(encoding="utf-8"))
    data["snapshot"]["input_json"] = '{"invoice_id": "forged"}'
    (tmp_path / "forged.json").write_text(json.dumps(data), encoding="utf-8")
    bad = runner.invoke(app, ["replay", str(tmp_path / "forged.json")])
    assert bad.exit_code == 1 and "BROKEN" in bad.output
    (tmp_path / "empty.json").write_text('{"format": "runplane.journal-export/1", "runs": []}')
    assert runner.invoke(app, ["replay", str(tmp_path / "empty.json")]).exit_code == 2
    assert runner.invoke(app, ["replay"]).exit_code == 2  # neither a file nor --from-kafka
