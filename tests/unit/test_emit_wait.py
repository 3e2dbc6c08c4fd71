"""`runplane emit --wait` says how the run ended — its output, or what it failed with — and
exits non-zero when it did not complete (a failed run must not look like success)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from runplane.cli import app, emit
from runplane.config import Settings
from runplane.runs.client import Client, RunResult
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    ErrorInfo,
    RunStatus,
    SessionSnapshot,
    TenantId,
)

# The Kafka clients here are faked; the CLI's reach check is not (see reachable_kafka).
pytestmark = pytest.mark.usefixtures("reachable_kafka")


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

    def admit(self, *args: Any, wait: bool = False, **kwargs: Any) -> AdmissionReply | RunResult:
        return RunResult(_ADMITTED, self.ended) if wait else _ADMITTED


_ADMITTED = AdmissionReply(
    admission_key="k-1", outcome=AdmissionOutcome.ADMITTED, run_id="r-1", replied_ms=1
)
_CANCELLED = ErrorInfo(type="RunCancelled", message="wrong customer")


@pytest.mark.parametrize(
    ("ended", "code", "word"),
    [
        (_snapshot(RunStatus.COMPLETED, output_json="1"), 0, "completed"),
        (_snapshot(RunStatus.FAILED), 1, "failed"),
        (_snapshot(RunStatus.QUARANTINED), 1, "quarantined"),
        # cancelled as today's executor records it, and as its own status
        (_snapshot(RunStatus.FAILED, error=_CANCELLED), 1, "cancelled"),
        (_snapshot(RunStatus.CANCELLED, error=_CANCELLED), 1, "cancelled"),
    ],
)
def test_emit_wait_exits_non_zero_unless_the_run_completed(
    monkeypatch: pytest.MonkeyPatch, ended: SessionSnapshot, code: int, word: str
) -> None:
    _Client.ended = ended
    monkeypatch.setattr(emit, "Client", _Client)
    monkeypatch.setenv("RUNPLANE_INITIATOR", "alice")
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--wait"])
    assert result.exit_code == code, result.output
    assert f"run r-1 ended: {word}" in result.output


class _Wire:
    """Client's Kafka side, replaced: admission answers ``reply``, the run ends ``ended``."""

    def __init__(self, reply: AdmissionReply, ended: SessionSnapshot) -> None:
        self.reply, self.ended = reply, ended
        self.waited: list[str] = []

    def send(self, request: Any, *, timeout: float) -> AdmissionReply:
        return self.reply

    def wait(self, run_id: str, *, timeout: float, since: Any) -> SessionSnapshot:
        self.waited.append(run_id)
        return self.ended

    def mark(self) -> None:
        return None


def _client(wire: _Wire) -> Client:
    client = Client.__new__(Client)  # no broker: the methods that reach it are replaced
    client._settings = Settings.from_env({})  # type: ignore[misc]
    for name in ("send", "wait", "mark"):
        object.__setattr__(client, name, getattr(wire, name))
    return client


@pytest.mark.parametrize(
    ("ended", "status", "output"),
    [
        (
            _snapshot(RunStatus.COMPLETED, output_json='{"refunded":12}'),
            "COMPLETED",
            {"refunded": 12},
        ),
        (_snapshot(RunStatus.FAILED, error=_CANCELLED), "CANCELLED", None),
    ],
)
def test_admit_wait_returns_the_final_status_and_output(
    ended: SessionSnapshot, status: str, output: Any
) -> None:
    wire = _Wire(_ADMITTED, ended)
    result = _client(wire).admit("refund", "k-1", {}, initiator="alice", wait=True)
    assert wire.waited == ["r-1"]
    assert result.status is RunStatus(status) and result.output == output
    assert result.run_id == "r-1" and result.outcome is AdmissionOutcome.ADMITTED


def test_admit_wait_of_a_refused_request_waits_for_nothing() -> None:
    refused = AdmissionReply(
        admission_key="k-1", outcome=AdmissionOutcome.REFUSED, reason="no", replied_ms=1
    )
    wire = _Wire(refused, _snapshot(RunStatus.COMPLETED))
    result = _client(wire).admit("refund", "k-1", {}, initiator="alice", wait=True)
    assert wire.waited == [] and result.status is None and result.reply is refused


# --- inputs from files, and an input too large refused before anything is sent -----------


class _Sending(_Wire):
    sent: ClassVar[list[Any]] = []

    def send(self, request: Any, *, timeout: float) -> AdmissionReply:
        self.sent.append(request)
        return self.reply


def _real_client(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``emit`` with the real ``Client.admit`` over a wire that records what it sends."""
    _Sending.sent = []
    wire = _Sending(_ADMITTED, _snapshot(RunStatus.COMPLETED, output_json="1"))

    class Factory:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.client = _client(wire)

        def __enter__(self) -> Client:
            return self.client

        def __exit__(self, *exc: object) -> None: ...

    monkeypatch.setattr(emit, "Client", Factory)
    monkeypatch.setenv("RUNPLANE_INITIATOR", "alice")
    return _Sending.sent


def test_input_from_a_file_and_from_stdin(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    sent = _real_client(monkeypatch)
    big = {"lines": ["x" * 100] * 2000}  # ~200 KB: more than a shell passes in one argument
    path = tmp_path / "input.json"
    path.write_text(json.dumps(big))
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--input", f"@{path}"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        app, ["emit", "refund", "--key", "k-2", "--input", "-"], input='{"from": "stdin"}'
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(r.input_json) for r in sent] == [big, {"from": "stdin"}]


@pytest.mark.parametrize(
    ("argument", "says"),
    [("@/nonexistent/input.json", "cannot read it"), ("{nope", "is not JSON")],
)
def test_a_bad_input_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, argument: str, says: str
) -> None:
    sent = _real_client(monkeypatch)
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--input", argument])
    assert result.exit_code == 2 and says in result.output and sent == []
    assert "Traceback" not in result.output


def test_an_oversized_input_is_refused_with_the_limit_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:

    sent = _real_client(monkeypatch)
    path = tmp_path / "big.json"
    path.write_text(json.dumps("x" * 1_500_000))  # 1.5 MB: Kafka's raw error before
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--input", f"@{path}"])
    assert result.exit_code == 2, result.output
    assert "over admission's limit of 524288 bytes" in result.output and sent == []
    assert len(result.output.strip().splitlines()) == 1
    monkeypatch.setenv("RUNPLANE_ADMISSION_MAX_INPUT_BYTES", "2000000")  # a larger limit
    result = CliRunner().invoke(app, ["emit", "refund", "--key", "k-1", "--input", f"@{path}"])
    assert result.exit_code == 0 and len(sent) == 1
