"""Admission refuses what would leave a run stuck or crash the service: a blank initiator
(security review M1) and an input nested past the recursion limit (m2)."""

from __future__ import annotations

import json

import pytest

from runplane.kafka.handler import Incoming, State
from runplane.wire import AdmissionOutcome, AdmissionReply, AdmissionRequest
from services.admission.decide import (
    MAX_INPUT_DEPTH,
    Admitted,
    CapabilitySpec,
    Position,
    Refusal,
    Refused,
    decide,
)
from services.admission.handler import AdmissionHandler

CAPS = {
    "free": CapabilitySpec(None),
    "refund": CapabilitySpec(
        {
            "type": "object",
            "properties": {"invoice_id": {"type": "string"}},
            "required": ["invoice_id"],
        }
    ),
}
POS = Position("admission", 0, 3)
NOW = 1_700_000_000_000


def _req(
    *, initiator: str = "alice", input_json: str = "{}", capability: str = "free"
) -> AdmissionRequest:
    return AdmissionRequest(
        admission_key="k1",
        capability=capability,
        input_json=input_json,
        tenant="acme",
        initiator=initiator,
        requested_ms=NOW,
    )


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("initiator", ["", " ", "\t\n"])
def test_an_empty_or_blank_initiator_is_refused_with_the_reason(initiator: str) -> None:
    d = decide(None, "k1", POS, _req(initiator=initiator), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.BAD_REQUEST
    assert d.reply.outcome is AdmissionOutcome.REFUSED and d.reply.run_id is None
    assert d.reply.reason is not None and "initiator is empty" in d.reply.reason
    assert "four-eyes" in d.reply.reason


def test_a_named_initiator_is_admitted_and_carried_to_the_run() -> None:
    d = decide(None, "k1", POS, _req(initiator="alice"), CAPS, NOW)
    assert isinstance(d, Admitted)
    assert d.start.initiator == "alice" and d.journal.attrs["initiator"] == "alice"


@pytest.mark.parametrize("capability", ["free", "refund"])
def test_an_input_nested_5000_deep_is_refused_as_invalid_input(capability: str) -> None:
    d = decide(None, "k1", POS, _req(input_json=_nested(5000), capability=capability), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.INVALID_INPUT
    assert d.reply.reason == f"input nests deeper than {MAX_INPUT_DEPTH} levels"


def test_nesting_below_the_recursion_limit_but_past_the_bound_is_refused_too() -> None:
    # 65 levels parse fine; the bound keeps every recursive consumer downstream far from its limit.
    deep = _nested(MAX_INPUT_DEPTH + 1)
    assert json.loads(deep) is not None
    d = decide(None, "k1", POS, _req(input_json=deep), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.INVALID_INPUT
    ok = decide(None, "k1", POS, _req(input_json=_nested(MAX_INPUT_DEPTH)), CAPS, NOW)
    assert isinstance(ok, Admitted)
    wide = json.dumps({"a": [{"b": [1, 2, {"c": "d"}]}] * 1000})
    assert isinstance(decide(None, "k1", POS, _req(input_json=wide), CAPS, NOW), Admitted)


def test_the_handler_answers_a_deeply_nested_request_with_a_refusal_reply() -> None:
    # Through the processor's handler: one reply on admission.replies, nothing raised (a
    # raise would dead-letter the request and leave `runplane emit --wait` hanging).
    handler = AdmissionHandler(CAPS)
    msg = Incoming("admission", 0, 3, "k1", _req(input_json=_nested(5000)), NOW)
    emits = handler.handle(State(handler.tables), msg, NOW)
    assert [(e.topic, e.key) for e in emits] == [("admission.replies", "k1")]
    reply = emits[0].value
    assert isinstance(reply, AdmissionReply) and reply.outcome is AdmissionOutcome.REFUSED
    assert reply.reason is not None and "nests deeper" in reply.reason


# --- the emitter side: the initiator is named, never guessed ---------------------------------


def test_the_client_never_defaults_the_initiator_to_the_os_user() -> None:
    from runplane.config import Settings
    from runplane.errors import ConfigError
    from runplane.runs.client import Client

    # Nothing is sent: the refusal comes before any I/O (the clients connect lazily).
    with (
        Client(Settings(bootstrap_servers="127.0.0.1:1")) as client,
        pytest.raises(ConfigError, match="RUNPLANE_INITIATOR"),
    ):
        client.admit("free", "k1", {})
    with Client(Settings(bootstrap_servers="127.0.0.1:1")) as client, pytest.raises(ConfigError):
        client.admit("free", "k1", {}, initiator=" ")


def test_emit_requires_an_initiator_and_says_what_it_means(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from runplane.cli import app

    monkeypatch.delenv("RUNPLANE_INITIATOR", raising=False)
    monkeypatch.setenv("RUNPLANE_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    runner = CliRunner()
    result = runner.invoke(app, ["emit", "refund", "--key", "k1"])
    assert result.exit_code == 2
    assert "no initiator" in result.output and "RUNPLANE_INITIATOR" in result.output
    helptext = " ".join(
        runner.invoke(app, ["emit", "--help"], env={"COLUMNS": "200"}).output.split()
    )
    assert "on whose behalf the run acts" in helptext and "Four-eyes refuses" in helptext
