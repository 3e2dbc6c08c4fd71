"""The sweeper's metrics. Breaches themselves are counted where they are confirmed, by the
cases service (``runplane_deadline_breaches_total``); these count what the sweeper sends."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

COMMANDS = Counter(
    "runplane_sweeper_commands_total",
    "Decisions sent to cases.commands (repeats included), by action (warn, breach)",
    ["action"],
)
REBUILDS = Counter(
    "runplane_sweeper_index_rebuilds_total",
    "Partitions whose due-time index was rebuilt from the cases topic",
)
UNREADABLE = Counter(
    "runplane_sweeper_unreadable_records_total",
    "Case records the sweeper could not decode (each one dead-lettered)",
)
REVALIDATIONS = Counter(
    "runplane_sweeper_revalidations_total",
    "Unconfirmed index entries checked against the committed cases records, by result "
    "(committed: kept; ghost: dropped, its obligation was never committed)",
    ["result"],
)
INDEX_ENTRIES = Gauge(
    "runplane_sweeper_index_entries", "Pending warn/breach entries in this instance's index"
)
SCHEDULE_TICKS = Counter(
    "runplane_sweeper_schedule_ticks_total", "Schedule ticks sent to admission (repeats included)"
)
SCHEDULE_REFUSED = Counter(
    "runplane_sweeper_schedule_refused_total", "Schedule ticks admission refused"
)
