"""A fake billing HTTP API for the refund example: the peer a mutating tool talks to.

Endpoints (JSON):

* ``GET  /invoices/{invoice_id}`` → ``{invoice_id, amount_cents, currency}``  (read-only)
* ``POST /charges`` with header ``Idempotency-Key`` and body ``{invoice_id, amount_cents}``
  → ``{charge_id, idempotency_key, invoice_id, amount_cents, status}``  (mutating)
* ``GET  /charges/{idempotency_key}`` → the charge, or 404: the *probe* a Reconcile recovery
  uses to learn whether an in-doubt charge happened.
* ``GET  /rates/{currency}`` → ``{currency, rate}`` (EUR to it, fixed values): the stand-in of
  the quote example's FX API (``examples/tools/quote.yaml``) beside the demo.

Why it counts: the platform promises that a recorded effect is never performed twice. The fake
counts every invocation of ``POST /charges`` per idempotency key (even repeats it would dedupe,
like a real provider), and writes the counts to a JSON file after each change, atomically, so a
test in another process reads them with :func:`read_counts`.

A charge is applied and counted *before* the optional ``charge_delay_s`` sleep, so a test can
kill an executor while the reply is in flight: the peer did the work, the caller never learned
it — the in-doubt case. Every route is also served under ``/via/{tag}/…``: a test gives each
client its own tag and :meth:`FakeBillingServer.charges_in_flight` says whose charge is
waiting for its reply right now.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from runplane.fakes._http import JSON, LoopbackServer, Request, Response


@dataclass(frozen=True)
class BillingCounts:
    """Invocation counts, keyed by idempotency key (charges, probes) or invoice id (fetches)."""

    charges: dict[str, int] = field(default_factory=dict)
    fetches: dict[str, int] = field(default_factory=dict)
    probes: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {"charges": self.charges, "fetches": self.fetches, "probes": self.probes}

    @classmethod
    def from_json(cls, data: JSON) -> BillingCounts:
        return cls(
            charges={str(k): int(v) for k, v in data.get("charges", {}).items()},
            fetches={str(k): int(v) for k, v in data.get("fetches", {}).items()},
            probes={str(k): int(v) for k, v in data.get("probes", {}).items()},
        )


def read_counts(path: Path) -> BillingCounts:
    """Counts persisted by a :class:`FakeBillingServer` (empty when none were written yet)."""
    try:
        return BillingCounts.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return BillingCounts()


def invoice_amount_cents(invoice_id: str) -> int:
    """A stable amount per invoice id, so replays and tests can predict it."""
    digest = hashlib.sha256(invoice_id.encode()).digest()
    return 100 + int.from_bytes(digest[:4], "big") % 99_900


# EUR to each currency: fixed, so a quote beside the demo is the same every time.
FX_RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "CHF": 0.94, "JPY": 162.0}


class FakeBillingServer:
    """The billing fake; use as a context manager or ``start()``/``stop()``."""

    def __init__(
        self,
        *,
        counts_path: Path | None = None,
        charge_delay_s: float = 0.0,
        port: int = 0,
    ) -> None:
        self.counts_path = counts_path
        self.charge_delay_s = charge_delay_s
        self._lock = threading.Lock()
        self._charges: dict[str, JSON] = {}
        self._charge_calls: Counter[str] = Counter()
        self._fetch_calls: Counter[str] = Counter()
        self._probe_calls: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._server = LoopbackServer(self._route, port=port)

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> FakeBillingServer:
        self._persist()
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def serve_forever(self) -> None:
        self._persist()
        self._server.serve_forever()

    def __enter__(self) -> FakeBillingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def counts(self) -> BillingCounts:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> BillingCounts:
        return BillingCounts(
            charges=dict(self._charge_calls),
            fetches=dict(self._fetch_calls),
            probes=dict(self._probe_calls),
        )

    def _persist(self) -> None:
        # Caller holds the lock (or no thread serves yet). Write-then-rename: a reader in
        # another process never sees a half-written file.
        if self.counts_path is None:
            return
        tmp = self.counts_path.with_suffix(self.counts_path.suffix + ".tmp")
        tmp.write_text(json.dumps(self._snapshot().to_json(), sort_keys=True))
        os.replace(tmp, self.counts_path)

    def charges_in_flight(self, tag: str = "") -> int:
        """Charges applied under ``/via/{tag}`` whose reply has not been sent yet."""
        with self._lock:
            return self._in_flight[tag]

    def _route(self, req: Request) -> Response:
        parts = [unquote(p) for p in req.path.split("/") if p]
        tag = ""
        if len(parts) >= 2 and parts[0] == "via":
            tag, parts = parts[1], parts[2:]
        if req.method == "GET" and len(parts) == 2 and parts[0] == "invoices":
            return self._fetch_invoice(parts[1])
        if req.method == "POST" and parts == ["charges"]:
            return self._charge(req, tag)
        if req.method == "GET" and len(parts) == 2 and parts[0] == "charges":
            return self._probe(parts[1])
        if req.method == "GET" and len(parts) == 2 and parts[0] == "rates":
            rate = FX_RATES.get(parts[1].upper())
            if rate is None:
                return Response(404, {"error": {"message": f"no rate for {parts[1]!r}"}})
            return Response(200, {"currency": parts[1].upper(), "rate": rate})
        return Response(404, {"error": {"message": f"no route {req.method} {req.path}"}})

    def _fetch_invoice(self, invoice_id: str) -> Response:
        with self._lock:
            self._fetch_calls[invoice_id] += 1
            self._persist()
        return Response(
            200,
            {
                "invoice_id": invoice_id,
                "amount_cents": invoice_amount_cents(invoice_id),
                "currency": "EUR",
            },
        )

    def _charge(self, req: Request, tag: str) -> Response:
        key = req.headers.get("idempotency-key", "")
        body = req.body or {}
        invoice_id = body.get("invoice_id")
        amount = body.get("amount_cents")
        if not key:
            return Response(400, {"error": {"message": "Idempotency-Key header is required"}})
        if not isinstance(invoice_id, str) or not isinstance(amount, int):
            return Response(
                400, {"error": {"message": "body needs invoice_id (str), amount_cents (int)"}}
            )
        with self._lock:
            self._charge_calls[key] += 1
            charge = self._charges.setdefault(key, _new_charge(key, invoice_id, amount))
            self._persist()
            self._in_flight[tag] += 1
        try:
            if self.charge_delay_s > 0:
                time.sleep(self.charge_delay_s)
        finally:
            with self._lock:
                self._in_flight[tag] -= 1
        return Response(200, charge)

    def _probe(self, key: str) -> Response:
        with self._lock:
            self._probe_calls[key] += 1
            charge = self._charges.get(key)
            self._persist()
        if charge is None:
            return Response(404, {"error": {"message": f"no charge with key {key}"}})
        return Response(200, charge)


def _new_charge(key: str, invoice_id: str, amount: int) -> dict[str, Any]:
    charge_id = "ch_" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return {
        "charge_id": charge_id,
        "idempotency_key": key,
        "invoice_id": invoice_id,
        "amount_cents": amount,
        "status": "succeeded",
    }
