"""The local stack: a real Apache Kafka 4.x (KRaft; one node, or a cluster of N with
``brokers=N`` / ``runplane up --brokers 3``) and Redis, no Docker.

``runplane up`` / ``down`` / ``status`` and the integration-test fixture call these::

    from runplane import Settings
    from runplane.stack import StackConfig, up

    config = StackConfig.from_settings(Settings.from_env())
    report = up(config)            # idempotent; raises StackError with the reason and log tail

Kafka runs from the jars Maven resolves into ``tools/kafka/target/libs`` (``resolve_jars``),
formatted once with ``StorageTool format --standalone``; Redis runs with no persistence. Both
keep their pid files, configs, data and logs under ``Settings.state_dir`` (``.runplane/``).

Two modules are public beside this front door, for what starts processes of its own next to
the stack (``runplane demo``, the end-to-end tests): ``runplane.stack.platform`` (the platform
processes ``runplane down`` stops and ``status`` shows) and ``runplane.stack.process`` (pids,
ports and log tails).
"""

from __future__ import annotations

from runplane.stack._cluster import bootstrap as cluster_bootstrap
from runplane.stack._cluster import size as cluster_size
from runplane.stack._config import StackConfig
from runplane.stack._errors import StackError
from runplane.stack._kafka import jars_resolved, kafka_answers, kafka_log_tail, resolve_jars
from runplane.stack._local import LocalStack, ensure_up
from runplane.stack._redis import redis_answers
from runplane.stack._stack import ComponentStatus, StackReport, down, status, up

__all__ = [
    "ComponentStatus",
    "LocalStack",
    "StackConfig",
    "StackError",
    "StackReport",
    "cluster_bootstrap",
    "cluster_size",
    "down",
    "ensure_up",
    "jars_resolved",
    "kafka_answers",
    "kafka_log_tail",
    "redis_answers",
    "resolve_jars",
    "status",
    "up",
]
