"""`runplane demo --agents … --tools …`: one's own modules and tools config are served beside
the examples, not instead of them, and the quote example's FX API is the billing fake's."""

from __future__ import annotations

from pathlib import Path

from runplane.config import Settings
from runplane.demo import DemoPorts, platform_env
from runplane.fakes import FakeBillingServer
from runplane.providers import load_offer

ROOT = Path(__file__).resolve().parents[2]
QUOTE = str(ROOT / "examples" / "tools" / "quote.yaml")


def _env(base: dict[str, str]) -> dict[str, str]:
    return platform_env(
        Settings(state_dir=Path("/tmp/x")),
        DemoPorts(billing=9111),
        principals_file=Path("/tmp/p.yaml"),
        calendars_file=None,
        base=base,
        agent_modules=("examples.quote",),
        tools_configs=(QUOTE,),
    )


def test_own_modules_and_tools_are_added_to_the_examples() -> None:
    env = _env({})
    modules = env["RUNPLANE_AGENT_MODULES"].split(",")
    assert {"examples.refund", "examples.support", "examples.quote"} <= set(modules)
    files = env["RUNPLANE_TOOLS_CONFIG"].split(",")
    assert files[0].endswith("billing.yaml") and files[1] == QUOTE
    offer = load_offer(env["RUNPLANE_TOOLS_CONFIG"], env)
    assert {"fx_rate", "fetch_invoice"} <= set(offer.tools)
    assert env["FX_API_URL"] == "http://127.0.0.1:9111"  # the billing fake answers /rates


def test_ones_own_fx_api_is_kept() -> None:
    env = _env({"FX_API_URL": "https://fx.example.com", "FX_API_TOKEN": "t"})
    assert (env["FX_API_URL"], env["FX_API_TOKEN"]) == ("https://fx.example.com", "t")


def test_the_billing_fake_answers_rates() -> None:
    import httpx

    server = FakeBillingServer()
    server.start()
    try:
        assert httpx.get(f"{server.url}/rates/usd").json() == {"currency": "USD", "rate": 1.08}
        assert httpx.get(f"{server.url}/rates/XXX").status_code == 404
    finally:
        server.stop()
