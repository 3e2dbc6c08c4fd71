"""Kafka plumbing: clients, topics, the murmur2 partitioner, the transactional processor.

Import the submodules (``runplane.kafka.processor``, ``.clients``, ``.topics``, …); only the
dependency-free partitioner is re-exported here, as docs/contracts.md names it.
"""

from __future__ import annotations

from runplane.kafka.partition import partition_for

__all__ = ["partition_for"]
