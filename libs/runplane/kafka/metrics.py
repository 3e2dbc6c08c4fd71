"""The shared processor's metrics: process-wide, labelled by service, so that
``runplane serve all`` keeps admission, cases and worklist apart."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MESSAGES = Counter(
    "runplane_processor_messages_total", "Input records handled and committed", ["service"]
)
DEADLETTERS = Counter(
    "runplane_processor_deadletters_total", "Input records dead-lettered", ["service", "kind"]
)
ABORTS = Counter("runplane_processor_aborts_total", "Transactions aborted", ["service"])
COMMIT_SECONDS = Histogram(
    "runplane_processor_commit_seconds",
    "send_offsets + commit_transaction latency",
    ["service"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
BATCH_SIZE = Histogram(
    "runplane_processor_batch_records",
    "Input records per transaction",
    ["service"],
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)
LAG = Gauge(
    "runplane_processor_consumer_lag_messages", "High watermark minus position", ["service"]
)
RESTORE_SECONDS = Histogram(
    "runplane_processor_restore_seconds", "Time to restore tables on assignment", ["service"]
)
UNREADABLE_ROWS = Counter(
    "runplane_processor_unreadable_rows_total",
    "Table keys dropped at restore because their newest row could not be decoded",
    ["service", "table"],
)
TICK_ERRORS = Counter(
    "runplane_processor_tick_errors_total", "Ticks that raised and were skipped", ["service"]
)
TABLE_ROWS = Gauge("runplane_processor_table_rows", "Rows held per table", ["service", "table"])
