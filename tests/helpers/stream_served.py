"""Registers the live-stream agent (``tests.helpers.stream_agent``) in the default registry:
the module an executor process is given in ``RUNPLANE_AGENT_MODULES``. Nothing else imports
it, so nothing that walks the default registry in a test process sees a test agent."""

from __future__ import annotations

from runplane.core import REGISTRY
from tests.helpers.stream_agent import narrate

REGISTRY.agent("narrate", durability="replayable")(narrate)
