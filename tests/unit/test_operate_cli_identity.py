"""``runplane signal`` and ``runplane runs cancel`` carry identity (issue 31, item 3).

By default they go through admission's authenticated endpoints (served here over a real
socket, an in-memory inbox in Kafka's place): the journaled sender is the token's principal,
whatever the command line says; without a valid token they are refused — one line, exit 2 —
and the direct Kafka path is taken in dev mode only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from test_operate_http import PRINCIPALS, Inbox
from typer.testing import CliRunner

from runplane.cli import app
from runplane.serving.shell import run_http
from runplane.wire import Signal
from services.admission.operate import HttpOperate

BASE = {
    "RUNPLANE_BOOTSTRAP_SERVERS": "127.0.0.1:1",  # nothing there: the HTTP path never needs it
    "RUNPLANE_INITIATOR": "mallory",
    "RUNPLANE_WORKLIST_TOKEN": "",
    "RUNPLANE_WORKLIST_TOKEN_FILE": "",
    "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "",
}


@pytest.fixture
def served() -> Iterator[tuple[str, Inbox]]:
    inbox = Inbox()
    stop = threading.Event()
    application = FastAPI(routes=HttpOperate(PRINCIPALS, inbox).routes())
    with run_http(application, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", inbox


def _invoke(argv: list[str], **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, argv, env={**BASE, **env})
    return result.exit_code, result.output


def test_a_signal_with_a_token_is_journaled_as_the_token_s_principal(
    served: tuple[str, Inbox],
) -> None:
    url, inbox = served
    code, out = _invoke(
        ["signal", "order-17", "vote", "--payload", '{"v": 1}', "--id", "s-1", "--url", url],
        RUNPLANE_WORKLIST_TOKEN="b",
    )
    assert code == 0, out
    [sent] = inbox.sent
    assert isinstance(sent, Signal)
    # bob's token: not RUNPLANE_INITIATOR (mallory), not anything the command line names.
    assert (sent.session_id, sent.sent_by, sent.signal_id) == ("r-live", "bob", "s-1")


def test_a_cancel_reads_the_token_from_a_file_and_names_the_operator(
    served: tuple[str, Inbox], tmp_path: Path
) -> None:
    url, inbox = served
    token = tmp_path / "token"
    token.write_text("a\n")
    code, out = _invoke(
        ["runs", "cancel", "r-live", "--reason", "withdrawn", "--url", url],
        RUNPLANE_WORKLIST_TOKEN_FILE=str(token),
    )
    assert code == 0, out
    [sent] = inbox.sent
    assert sent.name == "runplane.cancel" and sent.sent_by == "ada"


@pytest.mark.parametrize(
    ("argv", "token", "message"),
    [
        (["signal", "r-live", "vote"], "nope", "refused (unauthenticated): 401: unknown token"),
        (["runs", "cancel", "r-live", "--reason", "x"], "b", "refused (forbidden): 403"),
        (["signal", "r-live", "vote"], "g", "refused (unknown)"),  # another tenant's run
        (["signal", "r-live", "vote", "--as", "ada"], "b", "--as and --tenant are for dev mode"),
    ],
)
def test_without_a_valid_identity_it_is_refused_in_one_line(
    served: tuple[str, Inbox], argv: list[str], token: str, message: str
) -> None:
    url, inbox = served
    code, out = _invoke([*argv, "--url", url], RUNPLANE_WORKLIST_TOKEN=token)
    assert code == 2, out
    assert message in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1
    assert inbox.sent == []


def test_no_token_outside_dev_mode_is_refused_before_anything_connects() -> None:
    code, out = _invoke(["signal", "r-live", "vote", "--url", "http://127.0.0.1:1"])
    assert code == 2 and "no identity" in out and "dev mode only" in out


def test_admission_unreachable_is_exit_3_with_the_retry_advice() -> None:
    code, out = _invoke(
        ["signal", "r-live", "vote", "--url", "http://127.0.0.1:1"], RUNPLANE_WORKLIST_TOKEN="b"
    )
    assert code == 3 and "cannot reach admission" in out and "same --id" in out


def test_dev_mode_without_a_token_takes_the_kafka_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runplane.cli import operate
    from runplane.runs.operate import Sent

    calls: list[tuple[str, str | None]] = []

    class FakeClient:
        def __init__(self, settings: object) -> None:
            pass

        def __enter__(self) -> FakeClient:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def signal(self, run: str, name: str, payload: object, **kw: str | None) -> Sent:
            calls.append((run, kw["sent_by"]))
            return Sent(run, name, "sig-1")

    monkeypatch.setattr(operate, "Client", FakeClient)
    code, out = _invoke(
        ["signal", "r-live", "vote", "--as", "ops-ada"], RUNPLANE_ADMISSION_ALLOW_UNSIGNED="true"
    )
    assert code == 0, out
    assert calls == [("r-live", "ops-ada")]
