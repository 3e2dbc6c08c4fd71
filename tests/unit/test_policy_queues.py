"""The deployment policy's ``queues:`` section: which capabilities wait their turn, and how."""

from __future__ import annotations

import pytest

from runplane.core.policy import parse_policy
from runplane.core.queues import QueueLimits
from runplane.errors import ConfigError


def test_a_queue_is_declared_per_capability() -> None:
    policy = parse_policy(
        "queues:\n  payout: {concurrency: 5, per_tenant: 2, rate_per_s: 10, burst: 3}\n"
        "  lookup: {rate_per_s: 1}\n"
    )
    assert policy.queues == {
        "payout": QueueLimits(concurrency=5, per_tenant=2, rate_per_s=10, burst=3),
        "lookup": QueueLimits(rate_per_s=1),
    }
    assert parse_policy("agents: {}\n").queues == {}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("queues: {payout: {}}", "limits nothing"),
        ("queues: {payout: {concurency: 5}}", "unknown field"),
        ("queues: {payout: 5}", "must be a mapping"),
        ("queues: {payout: {concurrency: 0}}", "concurrency must be"),
        ("queues: {payout: {concurrency: 2, burst: 0}}", "burst must be"),
        ("queues: {payout: {concurrency: many}}", "ValueError"),
    ],
)
def test_a_bad_queue_is_a_named_configuration_error(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_policy(text)
