"""A declarative approval registers its obligation on the run's case: due ``expires_in`` on the
declared calendar, the task expiring when it is due, met by a person's decision in time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from runplane.core import StepCtx, replay_history
from runplane.core.manifest import compile_manifest, validate_manifest
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, RunStatus

AGENTS = Path(__file__).resolve().parents[2] / "examples" / "agents"
HOUR = 3_600_000


def _summarise() -> dict[str, Any]:
    loaded = yaml.safe_load((AGENTS / "summarise.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _driver(doc: dict[str, Any]) -> Driver:
    return Driver(
        compile_manifest(doc), providers={"openai": ScriptedProvider(["Draft."], name="openai")}
    )


def _obligation(driver: Driver, case_id: str) -> tuple[str, dict[str, Any]]:
    ((key, value),) = [(k, v) for k, v in driver.obligations.items() if k[0] == case_id]
    return key[1], value


def test_a_run_with_a_case_registers_the_approval_as_an_obligation_the_task_expires_on() -> None:
    driver = _driver(_summarise())
    run = driver.run("summarise", {"title": "Q3", "text": "x"}, case_id="case-7")
    assert run.status is RunStatus.AWAITING_HUMAN and run.task is not None
    name, obligation = _obligation(driver, "case-7")
    assert name == f"approval:summarise:{run.session_id}" and obligation["status"] == "OPEN"
    # The task's expiry is the obligation's due instant, 24 hours on the wall calendar.
    assert run.task.expires_ms == obligation["due_ms"]
    assert obligation["due_ms"] - run.task.opened_ms <= 24 * HOUR
    kinds = [r.kind for r in run.journal]
    assert kinds.index(JournalKind.DEADLINE_REGISTERED) < kinds.index(JournalKind.TASK_OPENED)

    run = driver.decide(run.session_id, "APPROVED", by=("erin",))
    assert run.status is RunStatus.COMPLETED
    assert _obligation(driver, "case-7")[1]["status"] == "MET"
    assert driver.verify(run.session_id).ok
    report = replay_history(compile_manifest(_summarise()), run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output


def test_a_rejection_in_time_meets_the_obligation_too() -> None:
    driver = _driver(_summarise())
    run = driver.run("summarise", {"title": "Q3", "text": "x"}, case_id="case-8")
    run = driver.decide(run.session_id, "REJECTED", comment="no", by=("erin",))
    assert run.output["status"] == "rejected"
    assert _obligation(driver, "case-8")[1]["status"] == "MET"


def test_a_run_without_a_case_keeps_the_tasks_own_expiry() -> None:
    driver = _driver(_summarise())
    run = driver.run("summarise", {"title": "Q3", "text": "x"})
    assert run.task is not None and run.task.expires_ms is not None
    assert run.task.expires_ms - run.task.opened_ms == 24 * HOUR
    assert driver.obligations == {}


def test_an_approval_without_expiry_registers_nothing() -> None:
    doc = copy.deepcopy(_summarise())
    del doc["spec"]["oversight"]["approval"]["expires_in"]
    driver = _driver(doc)
    run = driver.run("summarise", {"title": "Q3", "text": "x"}, case_id="case-9")
    assert run.task is not None and run.task.expires_ms is None
    assert driver.obligations == {}


def test_a_closed_case_refuses_the_obligation_and_the_run_fails_with_the_reason() -> None:
    driver = _driver(_summarise())
    driver.closed_cases.add("case-10")
    run = driver.run("summarise", {"title": "Q3", "text": "x"}, case_id="case-10")
    assert run.status is RunStatus.FAILED
    assert run.error is not None and run.error.startswith("CaseRefused")


def test_the_calendar_is_declared_with_expires_in_only() -> None:
    doc = copy.deepcopy(_summarise())
    approval = doc["spec"]["oversight"]["approval"]
    del approval["expires_in"]
    approval["calendar"] = "wall"
    assert [str(p) for p in validate_manifest(doc)] == [
        "spec.oversight.approval.calendar: only applies with expires_in "
        "(the obligation it is due on)"
    ]


def test_a_run_recorded_before_the_obligation_existed_replays_unchanged(
    monkeypatch: Any,
) -> None:
    doc = _summarise()
    driver = _driver(doc)
    with monkeypatch.context() as m:
        # The history the previous release wrote: no marker, no deadline before the task.
        m.setattr(StepCtx, "patched", lambda self, change_id: False)
        run = driver.run("summarise", {"title": "Q3", "text": "x"}, case_id="case-11")
        run = driver.decide(run.session_id, "APPROVED", by=("erin",))
    assert run.status is RunStatus.COMPLETED and driver.obligations == {}
    report = replay_history(compile_manifest(doc), run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output
