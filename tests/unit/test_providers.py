"""The OpenAI provider, HTTP tools and their reach classification, against the loopback fakes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runplane.core.agents import Generation, ModelProvider, Recovery, Tool
from runplane.errors import ConfigError, TerminalError
from runplane.fakes import FakeBillingServer, FakeOpenAIServer, invoice_amount_cents, read_counts
from runplane.providers import (
    HttpTool,
    OpenAIProvider,
    PeerCallError,
    Reach,
    ToolRegistry,
    build_tools,
    load_tools_config,
)

BILLING_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "tools" / "billing.yaml"


def billing_tools(url: str, client: httpx.AsyncClient | None = None) -> dict[str, Tool]:
    """The example billing config's tools against the fake at ``url``."""
    config = load_tools_config(BILLING_CONFIG, {"RUNPLANE_BILLING_URL": url})
    return build_tools(config, client, {}, python_tools=ToolRegistry())


@pytest.fixture
def openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="k-1") as server:
        yield server


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "counts.json") as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_completion_scripted_and_echo(openai: FakeOpenAIServer) -> None:
    openai.script("first answer")
    provider = OpenAIProvider(base_url=openai.url, model="gpt-x", api_key="k-1")
    try:
        one = await provider.complete([{"role": "user", "content": "hello there"}])
        two = await provider.complete([{"role": "user", "content": "say it back"}])
    finally:
        await provider.aclose()
    assert one.text == "first answer"
    assert (one.tokens_in, one.tokens_out) == (2, 2)
    assert two.text == "echo: say it back"
    assert provider.name == "openai"
    assert openai.requests == 2
    assert openai.bodies[0]["model"] == "gpt-x"


async def test_bad_key_is_rejected_not_retryable(openai: FakeOpenAIServer) -> None:
    provider = OpenAIProvider(base_url=openai.url, model="m", api_key="wrong")
    with pytest.raises(PeerCallError) as info:
        await provider.complete([{"role": "user", "content": "x"}])
    await provider.aclose()
    assert (info.value.reach, info.value.retryable, info.value.status) == (
        Reach.REJECTED,
        False,
        401,
    )
    assert "invalid api key" in str(info.value)


@pytest.mark.parametrize(
    ("status", "reach", "retryable"),
    [(500, Reach.IN_DOUBT, True), (429, Reach.REJECTED, True), (400, Reach.REJECTED, False)],
)
async def test_status_classification(
    openai: FakeOpenAIServer, status: int, reach: Reach, retryable: bool
) -> None:
    openai.fail_next(1, status)
    provider = OpenAIProvider(base_url=openai.url, model="m", api_key="k-1")
    with pytest.raises(PeerCallError) as info:
        await provider.complete([{"role": "user", "content": "x"}])
    # The injected failure is consumed: the next call succeeds.
    ok = await provider.complete([{"role": "user", "content": "x"}])
    await provider.aclose()
    assert (info.value.reach, info.value.retryable, info.value.status) == (reach, retryable, status)
    assert ok.text == "echo: x"


async def test_connection_refused_is_not_reached() -> None:
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{_closed_port()}/v1", model="m")
    with pytest.raises(PeerCallError) as info:
        await provider.complete([{"role": "user", "content": "x"}])
    await provider.aclose()
    assert info.value.reach is Reach.NOT_REACHED
    assert info.value.retryable


async def test_timeout_after_send_is_in_doubt(openai: FakeOpenAIServer) -> None:
    openai.delay_s = 0.5
    async with httpx.AsyncClient(timeout=httpx.Timeout(0.1)) as client:
        provider = OpenAIProvider(base_url=openai.url, model="m", api_key="k-1", client=client)
        with pytest.raises(PeerCallError) as info:
            await provider.complete([{"role": "user", "content": "x"}])
    assert info.value.reach is Reach.IN_DOUBT
    assert openai.requests == 1  # it did reach the peer


async def test_generate_speaks_the_model_provider_protocol(openai: FakeOpenAIServer) -> None:
    provider = OpenAIProvider(base_url=openai.url, model="default-m", api_key="k-1")
    assert isinstance(provider, ModelProvider)
    gen = await provider.generate("default", "why is the sky blue", {"max_tokens": 5})
    named = await provider.generate("other-m", [{"role": "user", "content": "hi"}], {})
    await provider.aclose()
    assert gen == Generation(text="echo: why is the sky blue", tokens_in=5, tokens_out=6)
    assert named.text == "echo: hi"
    assert [b["model"] for b in openai.bodies] == ["default-m", "other-m"]
    assert openai.bodies[0]["max_tokens"] == 5


def test_provider_refuses_bad_config() -> None:
    with pytest.raises(ConfigError):
        OpenAIProvider(base_url="ftp://x", model="m")
    with pytest.raises(ConfigError):
        HttpTool("x", "BREW", "http://127.0.0.1/")


async def test_billing_tools_fetch_charge_probe(billing: FakeBillingServer, tmp_path: Path) -> None:
    async with httpx.AsyncClient() as client:
        tools = billing_tools(billing.url, client)
        assert all(isinstance(t, Tool) for t in tools.values())
        assert tools["charge_card"].decl.effective_recovery is Recovery.RECONCILE
        invoice = await tools["fetch_invoice"].call({"invoice_id": "INV 7/a"})
        before = await tools["get_charge"].call({}, idempotency_key="run-1/0/3")
        charge = await tools["charge_card"].call(
            {"invoice_id": "INV 7/a", "amount_cents": invoice["amount_cents"]},
            idempotency_key="run-1/0/3",
        )
        again = await tools["charge_card"].call(
            {"invoice_id": "INV 7/a", "amount_cents": invoice["amount_cents"]},
            idempotency_key="run-1/0/3",
        )
        after = await tools["get_charge"].call({"idempotency_key": "run-1/0/3"})
    assert invoice["invoice_id"] == "INV 7/a"  # the id survived URL quoting
    assert invoice["amount_cents"] == invoice_amount_cents("INV 7/a")
    assert before is None
    assert after == charge == again  # the peer dedupes by key ...
    counts = read_counts(tmp_path / "counts.json")
    assert counts.charges == {"run-1/0/3": 2}  # ... but every invocation is counted
    assert counts.fetches == {"INV 7/a": 1}
    assert counts.probes == {"run-1/0/3": 2}


async def test_mutating_tool_needs_key_and_valid_body(billing: FakeBillingServer) -> None:
    charge = billing_tools(billing.url)["charge_card"]  # no client: one per call
    with pytest.raises(TerminalError):
        await charge.call({"invoice_id": "i", "amount_cents": 1})
    with pytest.raises(PeerCallError) as info:
        await charge.call({"invoice_id": "i", "amount_cents": "x"}, idempotency_key="k")
    assert (info.value.reach, info.value.retryable, info.value.status) == (
        Reach.REJECTED,
        False,
        400,
    )
    assert billing.counts().charges == {}


async def test_missing_url_argument_is_terminal(billing: FakeBillingServer) -> None:
    with pytest.raises(TerminalError, match="invoice_id"):
        await billing_tools(billing.url)["fetch_invoice"].call({})


def test_read_counts_of_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_counts(tmp_path / "nope.json").charges == {}


async def test_billing_via_tag_reports_charges_in_flight(tmp_path: Path) -> None:
    import asyncio

    with FakeBillingServer(charge_delay_s=0.3) as billing:
        charge = billing_tools(billing.url + "/via/a")["charge_card"]
        call = asyncio.create_task(
            charge.call({"invoice_id": "i", "amount_cents": 5}, idempotency_key="k1")
        )
        for _ in range(100):
            if billing.charges_in_flight("a"):
                break
            await asyncio.sleep(0.01)
        during = (billing.charges_in_flight("a"), billing.charges_in_flight("b"))
        await call
        assert during == (1, 0)
        assert billing.charges_in_flight("a") == 0
        assert billing.counts().charges == {"k1": 1}
