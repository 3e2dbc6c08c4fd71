"""``runplane cases close`` names who asks and never closes (so never creates) a case
nobody knows: it is refused before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from runplane.cli import app
from runplane.cli import cases as cases_cli
from runplane.wire import CaseRecord

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("reachable_kafka")]

KNOWN = CaseRecord(case_id="c-known", version=1, state_json="{}", updated_ms=1)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    closes: list[tuple[str, str]] = []

    def close_case(settings: Any, case_id: str, by: str, **kw: Any) -> tuple[bool, None]:
        closes.append((case_id, by))
        return True, None

    monkeypatch.setattr(cases_cli, "close_case", close_case)
    monkeypatch.setattr(
        cases_cli,
        "read_committed_case",
        lambda settings, case_id, **kw: KNOWN if case_id == KNOWN.case_id else None,
    )
    monkeypatch.delenv("RUNPLANE_INITIATOR", raising=False)
    return closes


def test_an_unknown_case_is_refused_and_nothing_is_sent(sent: list[tuple[str, str]]) -> None:
    result = CliRunner().invoke(app, ["cases", "close", "c-doesnotexist", "--as", "ops"])
    assert result.exit_code == 2 and "no case 'c-doesnotexist'" in result.output
    assert sent == []


def test_closing_needs_an_identity(sent: list[tuple[str, str]]) -> None:
    result = CliRunner().invoke(app, ["cases", "close", KNOWN.case_id])
    assert result.exit_code == 2 and "--as" in result.output and sent == []


def test_a_known_case_is_closed_for_the_named_principal(sent: list[tuple[str, str]]) -> None:
    result = CliRunner().invoke(
        app, ["cases", "close", KNOWN.case_id], env={"RUNPLANE_INITIATOR": "ops"}
    )
    assert result.exit_code == 0 and "c-known: closed" in result.output
    assert sent == [(KNOWN.case_id, "ops")]
