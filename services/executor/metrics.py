"""The executor's Prometheus metrics (names follow docs/metrics.md: ``runplane_`` prefix,
units in names, ``_total`` counters).

Defined once per process on the default registry, which ``runplane.serving.shell`` serves on
``/metrics``; several executor instances in one process (tests) share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from prometheus_client import Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@dataclass(frozen=True)
class ExecutorMetrics:
    runs_started: Counter
    runs_ended: Counter
    live_calls: Counter
    live_call_seconds: Histogram
    replays: Counter
    replay_length: Histogram
    evictions: Counter
    in_doubt: Counter
    txn_commit_seconds: Histogram
    txn_batch_records: Histogram
    txn_aborts: Counter
    deadletters: Counter
    runtimes: Gauge
    consumer_lag: Gauge
    poisoned: Counter
    expired: Counter
    timer_lateness: Histogram
    stranded: Counter


@cache
def executor_metrics() -> ExecutorMetrics:
    return ExecutorMetrics(
        runs_started=Counter("runplane_executor_runs_started_total", "Runs started."),
        runs_ended=Counter(
            "runplane_executor_runs_ended_total",
            "Runs that ended, by status (completed, failed, quarantined).",
            ["status"],
        ),
        live_calls=Counter(
            "runplane_live_calls_total",
            "Live effect calls by family and outcome (ok, failed, in_doubt).",
            ["family", "outcome"],
        ),
        live_call_seconds=Histogram(
            "runplane_live_call_seconds",
            "Live call latency, all attempts included.",
            ["family"],
            buckets=_LATENCY_BUCKETS,
        ),
        replays=Counter("runplane_executor_replays_total", "Runtimes rebuilt by replay."),
        replay_length=Histogram(
            "runplane_executor_replay_length_calls",
            "Recorded calls served per replay.",
            buckets=(0, 1, 5, 10, 50, 100, 500, 1000, 10_000, 100_000),
        ),
        evictions=Counter("runplane_executor_evictions_total", "Idle runtimes evicted."),
        in_doubt=Counter(
            "runplane_executor_in_doubt_total",
            "Announced calls found without an outcome, by declared recovery.",
            ["recovery"],
        ),
        txn_commit_seconds=Histogram(
            "runplane_executor_txn_commit_seconds",
            "Time to produce a group commit and commit its transaction.",
            buckets=_LATENCY_BUCKETS,
        ),
        txn_batch_records=Histogram(
            "runplane_executor_txn_batch_records",
            "Records per committed transaction.",
            buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000),
        ),
        txn_aborts=Counter("runplane_executor_txn_aborts_total", "Aborted transactions."),
        deadletters=Counter(
            "runplane_executor_deadletters_total",
            "Inbox records dead-lettered, by reason.",
            ["reason"],
        ),
        runtimes=Gauge(
            "runplane_executor_runtimes",
            "Runs of owned partitions by residency (resident, evicted, parked).",
            ["state"],
        ),
        consumer_lag=Gauge(
            "runplane_executor_consumer_lag_messages",
            "Inbox messages not yet consumed, summed over owned partitions.",
        ),
        poisoned=Counter(
            "runplane_executor_poisoned_runs_total",
            "Runs failed because serving them raised (a poison pill contained), by where.",
            ["where"],
        ),
        expired=Counter(
            "runplane_executor_results_expired_total",
            "Ended runs whose bodies the results retention tombstoned.",
        ),
        timer_lateness=Histogram(
            "runplane_executor_timer_lateness_seconds",
            "How long after its journaled instant a durable timer was delivered.",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
        ),
        stranded=Counter(
            "runplane_executor_stranded_total",
            "Runs no deployed version serves: parked on their version, inbox records held for"
            " them, runs released when their line is deployed again.",
            ["event"],
        ),
    )
