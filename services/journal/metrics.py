"""The journal service's metrics (names listed in docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECORDS = Counter(
    "runplane_journal_records_total", "Journal records audited, by verdict.", ["verdict"]
)
CHAIN_BREAKS = Counter(
    "runplane_chain_breaks_total",
    "Runs whose chain broke (counted once per run, at the first break).",
)
QUARANTINES = Counter(
    "runplane_journal_quarantines_total", "Quarantine wakes sent to the executor for broken chains."
)
DEADLETTERS = Counter(
    "runplane_journal_deadletters_total",
    "Journal/results records that could not be decoded.",
    ["topic"],
)
HELD = Gauge("runplane_journal_held_records", "Journal records waiting for their body.")
AUDIT_LAG = Gauge("runplane_audit_lag_records", "Journal records not audited yet (consumer lag).")
AUDIT_DELAY = Gauge(
    "runplane_audit_delay_seconds",
    "Age of the last audited record when it was audited (stamp to verdict).",
)
COMMIT_SECONDS = Histogram(
    "runplane_journal_txn_commit_seconds",
    "Audit transaction commit latency.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
COST_TOKENS = Counter(
    "runplane_cost_tokens_total",
    "Tokens spent, by capability and direction (in/out).",
    ["capability", "direction"],
)
COST_UNITS = Counter(
    "runplane_cost_units_total", "Cost units spent, by capability.", ["capability"]
)
INDEXED = Counter(
    "runplane_journal_indexed_total", "Audit records folded into the Redis run index."
)
INDEX_REBUILDS = Counter(
    "runplane_journal_index_rebuilds_total", "Times the run index was rebuilt from audit."
)
