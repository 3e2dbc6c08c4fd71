"""``examples/pydantic_ai_support.py`` through the Driver: the refund waits for a person,
approved it is made once to the account on file, rejected it is not made, and the chain
verifies."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from runplane.core import REGISTRY, AgentRegistry
from runplane.providers import TOOLS, ModelRegistry
from runplane.testing import Driver
from runplane.wire import RunStatus

CASE = {"customer_id": "c-1", "order": "o-1", "amount_eur": 40}
NAME = "examples.pydantic_ai_support"


@pytest.fixture
def E(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example, imported with its model provider registered apart: the default registry
    is what other tests' executors offer (an offer of this process's Python providers)."""
    monkeypatch.setattr("runplane.contrib.pydantic_ai.MODELS", ModelRegistry())
    monkeypatch.delitem(sys.modules, NAME, raising=False)
    yield importlib.import_module(NAME)
    sys.modules.pop(NAME, None)


def _driver(E: ModuleType, performed: list[dict[str, object]]) -> Driver:
    tools = E.DURABLE.tool_functions()
    refund = tools["issue_refund"]

    async def counted(args: dict[str, object], key: str | None = None) -> object:
        performed.append(args)
        return await refund(args, key)

    tools["issue_refund"] = counted
    return Driver(
        AgentRegistry([REGISTRY.spec(E.CAPABILITY)]),
        tools=tools,
        providers={E.DURABLE.provider: E.DURABLE.model_provider},
    )


def test_the_refund_waits_for_a_person_and_is_made_once_when_approved(E: ModuleType) -> None:
    performed: list[dict[str, object]] = []
    driver = _driver(E, performed)
    run = driver.run(E.CAPABILITY, CASE)
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert run.task is not None and performed == []
    run = driver.decide(run.session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"answer": "Refunded 40 EUR."}
    assert performed == [{"recipient": "NL91ABNA0417164300", "amount_eur": 40, "order": "o-1"}]
    assert driver.verify(run.session_id).ok


def test_rejected_the_refund_is_not_made(E: ModuleType) -> None:
    performed: list[dict[str, object]] = []
    driver = _driver(E, performed)
    run = driver.run(E.CAPABILITY, CASE)
    run = driver.decide(run.session_id, "REJECTED", comment="duplicate case")
    assert run.status is RunStatus.COMPLETED, run.error
    assert performed == []
    assert run.output["answer"].startswith("No refund: CallRejected")


def test_crm_lookup_stays_the_runplane_tool_of_examples_crm(E: ModuleType) -> None:
    from examples.crm import crm_lookup

    assert TOOLS["crm_lookup"].fn is crm_lookup
    assert "issue_refund" in TOOLS and "crm_lookup" in E.DURABLE.tools
