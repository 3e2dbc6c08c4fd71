"""Users' own tools in the deployed executor, on the real stack.

The stock executor (``python -m services.executor``, what ``runplane serve executor`` runs) is
started with a user's agent module (``examples.quote``: a ``@tool`` Python function) and the
example refund agent, and a tools config holding the user's HTTP tool (auth from an
environment variable) and the billing tools. A quote run calls both of the user's tools; a
refund run reads its invoice through the config's billing tool and parks on its approval.
Admission with a config that lacks the HTTP tool refuses a quote run with the reason, before
anything runs.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_stock_executor_support import StockExecutor

from runplane.config import Settings
from runplane.fakes import FakeBillingServer
from runplane.fakes._http import LoopbackServer, Request, Response
from runplane.runs.client import Client
from runplane.wire import AdmissionOutcome, ResultEntry, RunStatus, Sensitivity
from services.admission.serve import build as build_admission
from services.admission.settings import AdmissionSettings
from tests.helpers.harness import admit, plain_producer, read_topic, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "fx-" + uuid.uuid4().hex


@pytest.fixture
def fx() -> Iterator[tuple[str, list[Request]]]:
    seen: list[Request] = []

    def route(req: Request) -> Response:
        seen.append(req)
        if req.headers.get("authorization") != f"Bearer {TOKEN}":
            return Response(401, {"error": "no token"})
        return Response(200, {"currency": req.path.rsplit("/", 1)[-1], "rate": 1.5})

    server = LoopbackServer(route)
    server.start()
    yield server.url, seen
    server.stop()


def _config(tmp_path: Path, *, with_fx: bool) -> Path:
    """The user's file: the billing example's tools, plus the fx_rate HTTP tool."""
    doc = yaml.safe_load((ROOT / "examples" / "tools" / "billing.yaml").read_text())
    if with_fx:
        doc["tools"] += yaml.safe_load((ROOT / "examples" / "tools" / "quote.yaml").read_text())[
            "tools"
        ]
    path = tmp_path / ("tools.yaml" if with_fx else "tools-without-fx.yaml")
    path.write_text(yaml.safe_dump(doc))
    return path


def _results(settings: Settings, run_id: str) -> dict[str, ResultEntry]:
    return {
        r.name: r
        for _, r in read_topic(settings, "results")
        if isinstance(r, ResultEntry) and r.session_id == run_id
    }


def test_stock_executor_serves_a_users_python_and_http_tools(
    settings: Settings, fx: tuple[str, list[Request]], tmp_path: Path
) -> None:
    fx_url, seen = fx
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as billing:
        executor = StockExecutor(
            settings,
            {
                "RUNPLANE_AGENT_MODULES": "examples.quote,examples.refund",
                "RUNPLANE_TOOLS_CONFIG": str(_config(tmp_path, with_fx=True)),
                "RUNPLANE_BILLING_URL": billing.url,
                "FX_API_URL": fx_url,
                "FX_API_TOKEN": TOKEN,  # the secret: in the environment, not in the file
            },
            tmp_path / "executor.log",
        )
        try:
            producer = plain_producer(settings)
            [quote] = admit(
                producer,
                settings,
                "quote",
                [{"country": "NL", "currency": "USD", "amount_eur": 10}],
            )
            [refund] = admit(producer, settings, "refund", [{"invoice_id": "INV-OWN"}])

            def ended() -> bool:
                snaps = sessions(settings)
                q, r = snaps.get(quote.run_id), snaps.get(refund.run_id)
                return (
                    q is not None
                    and q.status is RunStatus.COMPLETED
                    and r is not None
                    and r.status is RunStatus.AWAITING_HUMAN
                )

            try:
                wait_for(ended, timeout_s=90, what="quote completed, refund parked")
            except TimeoutError:
                log = (tmp_path / "executor.log").read_text(errors="replace")[-3000:]
                snaps = sessions(settings)
                states = {r: snaps[r].status for r in (quote.run_id, refund.run_id) if r in snaps}
                raise AssertionError(f"runs at {states}; the executor's log:\n{log}") from None
        finally:
            executor.stop()
        fetches = billing.counts().fetches

    results = _results(settings, quote.run_id)
    assert json.loads(results["tool://shipping_days"].value_json or "null") == {
        "country": "NL",
        "days": 2,
    }
    assert json.loads(results["tool://fx_rate"].value_json or "null") == {
        "currency": "USD",
        "rate": 1.5,
    }
    assert [r.path for r in seen] == ["/rates/USD"]  # called once, with the token
    # The label the config declares rides with the result (joined with the source label).
    assert results["tool://fx_rate"].label.sensitivity is Sensitivity.CONFIDENTIAL
    assert "tool://fx_rate" in results["tool://fx_rate"].label.provenance
    assert "tool://fetch_invoice" in _results(settings, refund.run_id)
    assert fetches == {"INV-OWN": 1}


def test_admission_refuses_a_run_whose_tool_the_executor_does_not_offer(
    settings: Settings, tmp_path: Path
) -> None:
    base = dataclasses.replace(settings, tools_config=str(_config(tmp_path, with_fx=False)))
    processor = build_admission(
        AdmissionSettings(
            base=base, agent_modules=("examples.quote", "examples.refund"), allow_unsigned=True
        )
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert processor.ready.wait(60), "admission never got its partitions"
        with Client(settings) as emitter:
            refused = emitter.admit(
                "quote",
                f"q-{uuid.uuid4().hex[:8]}",
                {"country": "NL", "currency": "USD", "amount_eur": 1},
                tenant="acme",
                initiator="bob",
            )
            admitted = emitter.admit(
                "refund",
                f"r-{uuid.uuid4().hex[:8]}",
                {"invoice_id": "INV-1"},
                tenant="acme",
                initiator="bob",
            )
    finally:
        stop.set()
        thread.join(30)
    assert refused.outcome is AdmissionOutcome.REFUSED
    assert refused.reason == ("quote needs tool(s) fx_rate, which the executor does not offer"), (
        refused.reason
    )
    assert admitted.outcome is AdmissionOutcome.ADMITTED
