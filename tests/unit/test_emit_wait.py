"""`runplane emit --wait` says how the run ended — its output, or what it failed with — and
exits non-zero when it did not complete (a failed run must not look like success)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from runplane.cli import app, emit
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    ErrorInfo,
    RunStatus,
    SessionSnapshot,
    TenantId,
)


def _snapshot(status: RunStatus, **fields: Any) -> SessionSnapshot:
    return SessionSnapshot(
        session_id="r-1",
        capability="refund",
        status=status,
        era=0,
        next_seq=3,
        last_hash="a" * 64,
        admission_key="k-1",
        tenant=TenantId("default"),
        initiator="alice",
        input_json="{}",
        started_ms=1,
        updated_ms=2,
        **fields,
    )


@pytest.mark.parametrize(
    ("snapshot", "line"),
    [
        (
            _snapshot(RunStatus.COMPLETED, output_json='{"refunded":12}'),
            'run r-1 ended: completed, output {"refunded":12}',
        ),
        (
            _snapshot(RunStatus.FAILED, error=ErrorInfo(type="ToolError", message="card declined")),
            "run r-1 ended: failed: ToolError: card declined",
        ),
        (
            _snapshot(
                RunStatus.FAILED, error=ErrorInfo(type="RunCancelled", message="wrong customer")
            ),
            "run r-1 ended: cancelled: wrong customer",
        ),
        (_snapshot(RunStatus.QUARANTINED), "run r-1 ended: quarantined"),
    ],
)
def test_the_ended_line_shows_the_result(snapshot: SessionSnapshot, line: str) -> None:
    assert emit.ended_line(snapshot) == line


def test_a_long_output_is_cut_with_a_pointer_to_all_of_it() -> None:
    line = emit.ended_line(_snapshot(RunStatus.COMPLETED, output_json='"' + "x" * 5000 + '"'))
    assert len(line) < 2_200 and "5002 characters; runs show has all" in line


class _Client:
    """The emitter client, standing in for admission and the broker: this test is of the
    command's exit rule, not of the services (tests/integration drive those)."""

    ended: SessionSnapshot

    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None: ...

    def mark(self) -> None:
        return None

    def admit(self, *args: Any, **kwargs: Any) -> AdmissionReply:
        return AdmissionReply(
            admission_key="k-1", outcome=AdmissionOutcome.ADMITTED, run_id="r-1", replied_ms=1
        )

    def wait(self, *args: Any, **kwargs: Any) -> SessionSnapshot:
        return self.ended

    @staticmethod
    def floor_for(reply: Any, mark: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("status", "code"),
    [(RunStatus.COMPLETED, 0), (RunStatus.FAILED, 1), (RunStatus.QUARANTINED, 1)],
)
def test_emit_wait_exits_non_zero_unless_the_run_completed(
    monkeypatch: pytest.MonkeyPatch, status: RunStatus, code: int
) -> None:
    _Client.ended = _snapshot(status, output_json="1" if status is RunStatus.COMPLETED else None)
    monkeypatch.setattr(emit, "Client", _Client)
    monkeypatch.setenv("RUNPLANE_INITIATOR", "alice")
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--wait"])
    assert result.exit_code == code, result.output
    assert f"run r-1 ended: {status.value.lower()}" in result.output
