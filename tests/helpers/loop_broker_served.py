"""Registers the broker loop agents (``tests.helpers.loop_broker``) in the default registry:
the module an executor process is given in ``RUNPLANE_AGENT_MODULES``. Nothing else imports
it, so nothing that walks the default registry in a test process sees a test agent."""

from __future__ import annotations

from runplane.core import REGISTRY
from tests.helpers.loop_broker import register

register(REGISTRY)
