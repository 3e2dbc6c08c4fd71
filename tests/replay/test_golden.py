"""Golden journals: histories recorded by earlier code must still verify and replay.

Like Temporal's replayer tests: the current agent code is replayed against a stored history;
a divergence means runs in flight at a deploy would be quarantined.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import examples.plan_triage  # registers "plan.lookup"
import examples.refund
import examples.triage  # noqa: F401  (registers "triage")
from runplane.core import REGISTRY, replay_history, verify_chain
from runplane.wire import JournalRecord, ResultEntry, RunStatus, SessionSnapshot, from_dict

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("*.json"))


def _load(
    path: Path,
) -> tuple[SessionSnapshot, list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    snapshot = from_dict(SessionSnapshot, data["snapshot"])
    journal = [from_dict(JournalRecord, r) for r in data["journal"]]
    results = {(e.era, e.call_seq): e for e in (from_dict(ResultEntry, r) for r in data["results"])}
    return snapshot, journal, results


def test_golden_journals_exist() -> None:
    assert {p.stem for p in FILES} >= {"refund_approved", "triage_case_deadline"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden_journal_verifies_and_replays_without_live_calls(path: Path) -> None:
    snapshot, journal, results = _load(path)
    verdict = verify_chain(journal, results)
    assert verdict.ok, str(verdict)
    assert snapshot.status is RunStatus.COMPLETED and snapshot.last_hash == journal[-1].hash
    report = replay_history(REGISTRY.spec(snapshot.capability), snapshot, results)
    assert report.divergence is None and report.live_calls == 0
    assert report.output == json.loads(snapshot.output_json or "null")
    assert report.replayed == len(results)


def test_a_recorded_golden_matches_what_the_code_records_today() -> None:
    # The recorder is deterministic (fake clock, scripted tools): re-recording must give the
    # stored chain byte for byte, or the chain format changed without a version bump.
    spec = importlib.util.spec_from_file_location(
        "record_golden", Path(__file__).parent / "record_golden.py"
    )
    assert spec is not None and spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    stored = json.loads((GOLDEN / "refund_approved.json").read_text(encoding="utf-8"))
    assert recorder.dump(recorder.record_refund())["journal"] == stored["journal"]


def test_a_recorded_fan_out_matches_what_the_code_records_today() -> None:
    # Branches, their outcomes in ready order and the join: the fan-out record format.
    spec = importlib.util.spec_from_file_location(
        "record_golden", Path(__file__).parent / "record_golden.py"
    )
    assert spec is not None and spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    stored = json.loads((GOLDEN / "fanout_lookup.json").read_text(encoding="utf-8"))
    assert recorder.dump(recorder.record_fanout())["journal"] == stored["journal"]
    # Commissions: the plan record, both children announced, their results applied in order.
    stored = json.loads((GOLDEN / "commission_triage.json").read_text(encoding="utf-8"))
    assert recorder.dump(recorder.record_commission())["journal"] == stored["journal"]


def test_the_pytest_helper_replays_every_golden_journal() -> None:
    from runplane.testing import assert_replays

    reports = assert_replays(GOLDEN)
    assert len(reports) == len(FILES) and all(r.replayed > 0 for r in reports)


def test_the_golden_loop_verifies_replays_calling_nobody_and_re_records_byte_for_byte() -> None:
    from runplane.testing import assert_replays
    from tests.helpers.support_loop import AGENTS

    path = Path(__file__).parent / "golden_loop" / "support_loop_injection.json"
    snapshot, journal, results = _load(path)
    assert verify_chain(journal, results).ok
    report = replay_history(AGENTS.spec(snapshot.capability), snapshot, results)
    assert report.divergence is None and report.live_calls == 0
    assert report.replayed == len(results)
    assert any(r.attrs.get("gate") == "refused" for r in journal)  # the refused injection
    assert len(assert_replays(path.parent, AGENTS)) == 1
    spec = importlib.util.spec_from_file_location(
        "record_golden", Path(__file__).parent / "record_golden.py"
    )
    assert spec is not None and spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert recorder.dump(recorder.record_loop())["journal"] == stored["journal"]
