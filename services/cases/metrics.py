"""The cases service's metrics (process-wide, like every prometheus-client metric).

Counted when a command is handled. A batch that aborts is handled again after the rewind, so
under aborts the counters can run slightly ahead of what was committed; they are operational
signals, the committed ``cases`` topic is the record.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

COMMANDS = Counter(
    "runplane_cases_commands_total",
    "Case commands handled, by op and outcome (accepted, refused, duplicate)",
    ["op", "outcome"],
)
OBLIGATIONS_OPEN = Gauge(
    "runplane_obligations_open", "Obligations OPEN or WARNED on this instance's cases"
)
WARNINGS = Counter(
    "runplane_deadline_warnings_total", "Obligations moved to WARNED (first warning only)"
)
BREACHES = Counter(
    "runplane_deadline_breaches_total",
    "Obligations moved to BREACHED (one sealed sweep run each)",
)
