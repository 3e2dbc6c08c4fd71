"""Loopback fakes of things outside the platform, for tests, demos and benchmarks.

* :class:`FakeOpenAIServer` — an OpenAI-compatible chat-completions server.
* :class:`FakeBillingServer` — the refund example's billing API (invoice, charge, probe),
  counting invocations per idempotency key into a file (:func:`read_counts`).
* :func:`free_port` — a free loopback port for a server about to start.

They listen on 127.0.0.1 only. ``python -m runplane.fakes billing|openai --port N`` runs one
as its own process.
"""

from __future__ import annotations

from runplane.fakes._billing import (
    BillingCounts,
    FakeBillingServer,
    invoice_amount_cents,
    read_counts,
)
from runplane.fakes._http import free_port
from runplane.fakes._openai import FakeOpenAIServer

__all__ = [
    "BillingCounts",
    "FakeBillingServer",
    "FakeOpenAIServer",
    "free_port",
    "invoice_amount_cents",
    "read_counts",
]
