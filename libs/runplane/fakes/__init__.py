"""Loopback fakes of things outside the platform, for tests, demos and benchmarks.

* :class:`FakeOpenAIServer` — an OpenAI-compatible chat-completions server;
  :class:`FakeAnthropicServer` — the Messages API. Both speak tool calling and answer from a
  model function (:data:`ModelFunction`: ``(messages, tools) -> Generation``), such as
  :func:`scripted` turns or a model that :func:`obeys_instructions` planted in tool results.
* :class:`FakeBillingServer` — the refund example's billing API (invoice, charge, probe),
  counting invocations per idempotency key into a file (:func:`read_counts`).
* :func:`free_port` — a free loopback port for a server about to start.

They listen on 127.0.0.1 only. ``python -m runplane.fakes billing|openai|anthropic --port N`` runs one
as its own process.
"""

from __future__ import annotations

from runplane.fakes._anthropic import FakeAnthropicServer
from runplane.fakes._billing import (
    BillingCounts,
    FakeBillingServer,
    invoice_amount_cents,
    read_counts,
)
from runplane.fakes._http import free_port
from runplane.fakes._openai import FakeOpenAIServer
from runplane.fakes._script import (
    ModelFunction,
    Said,
    ScriptExhausted,
    echo,
    obeys_instructions,
    scripted,
)

__all__ = [
    "BillingCounts",
    "FakeAnthropicServer",
    "FakeBillingServer",
    "FakeOpenAIServer",
    "ModelFunction",
    "Said",
    "ScriptExhausted",
    "echo",
    "free_port",
    "invoice_amount_cents",
    "obeys_instructions",
    "read_counts",
    "scripted",
]
