"""Registers the Pydantic AI support agent (``tests.helpers.pydantic_support``) in the default
registries — the agent in ``REGISTRY``, its tools in ``TOOLS``, its model provider in
``MODELS`` — for an executor process (``RUNPLANE_AGENT_MODULES``). Nothing else imports it."""

from __future__ import annotations

from runplane.core import REGISTRY
from tests.helpers.pydantic_support import build

build(REGISTRY)
