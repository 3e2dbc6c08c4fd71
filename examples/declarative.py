"""Declarative agents: registers every manifest in ``examples/agents/`` (``summarise``,
``collect``) into ``runplane.core.REGISTRY`` when imported — put ``examples.declarative`` in
``RUNPLANE_AGENT_MODULES`` and the executor and admission serve them like coded agents."""

from __future__ import annotations

from pathlib import Path

from runplane.core import REGISTRY
from runplane.core.manifest import register_manifests

MANIFESTS = Path(__file__).parent / "agents"

SPECS = register_manifests(MANIFESTS, REGISTRY)
