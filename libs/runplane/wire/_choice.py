"""Which ``Serde`` a deployment speaks, chosen once at the edge from its settings: Avro
single-object encoding by default, the Confluent wire format with a schema registry when
``RUNPLANE_SCHEMA_REGISTRY_URL`` is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.wire._codec import Serde, SingleObjectSerde

if TYPE_CHECKING:
    from runplane.config import Settings

__all__ = ["serde_for"]


def serde_for(settings: Settings) -> Serde:
    """The serde every service of this deployment reads and writes with."""
    if settings.schema_registry_url:
        # Late on purpose: the registry client costs ~0.6 s at import, and only a deployment
        # with a schema registry needs it (the one entry of LAZY in test_boundaries).
        from runplane.wire._confluent import ConfluentSerde

        return ConfluentSerde.from_url(
            settings.schema_registry_url, topic_prefix=settings.topic_prefix
        )
    return SingleObjectSerde()
