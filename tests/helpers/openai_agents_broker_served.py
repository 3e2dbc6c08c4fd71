"""Registers the Agents SDK support agent (``tests.helpers.openai_agents_support``) for the
broker tests in the default registry, served by the tools config of ``tests.helpers.
loop_broker`` (HTTP tools, the OpenAI-compatible fake as provider ``openai``): the module an
executor process is given in ``RUNPLANE_AGENT_MODULES``. Nothing else imports it."""

from __future__ import annotations

from runplane.core import REGISTRY
from tests.helpers.openai_agents_support import BROKER, register

register(REGISTRY, BROKER, "openai", "fake-model")
