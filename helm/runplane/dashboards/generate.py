"""Generate the Grafana dashboard ``runplane.json`` beside this file.

    python helm/runplane/dashboards/generate.py

The dashboard is data, but hand-editing 1,000 lines of panel JSON drifts; edit the panels here
and regenerate. ``tests/unit/test_deploy_consistency.py`` fails when the JSON is stale, and
when it draws a metric ``docs/metrics.md`` does not list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("runplane.json")
NS = 'namespace=~"$namespace"'
DS = {"type": "prometheus", "uid": "${datasource}"}
R = "[$__rate_interval]"
Target = tuple[str, str]


class Board:
    """Panels laid out left to right in rows of 24 columns, 8 units high."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0

    def _id(self) -> int:
        return len(self.panels) + 1

    def row(self, title: str) -> None:
        self.panels.append(
            {
                "type": "row",
                "id": self._id(),
                "title": title,
                "collapsed": False,
                "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1},
                "panels": [],
            }
        )
        self.y += 1

    def next_line(self) -> None:
        self.y += 8

    def ts(
        self, title: str, targets: list[Target], x: int, w: int, unit: str = "short", desc: str = ""
    ) -> None:
        self.panels.append(
            {
                "type": "timeseries",
                "id": self._id(),
                "title": title,
                "description": desc,
                "datasource": DS,
                "gridPos": {"x": x, "y": self.y, "w": w, "h": 8},
                "fieldConfig": {
                    "defaults": {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10}},
                    "overrides": [],
                },
                "options": {
                    "legend": {
                        "displayMode": "table",
                        "placement": "bottom",
                        "calcs": ["lastNotNull", "max"],
                    },
                    "tooltip": {"mode": "multi", "sort": "desc"},
                },
                "targets": [
                    {"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": legend}
                    for i, (e, legend) in enumerate(targets)
                ],
            }
        )

    def stat(self, title: str, expr: str, x: int, w: int, desc: str = "") -> None:
        """A single number, red from 1 up (for things that should never happen)."""
        steps = [{"color": "green", "value": None}, {"color": "red", "value": 1}]
        self.panels.append(
            {
                "type": "stat",
                "id": self._id(),
                "title": title,
                "description": desc,
                "datasource": DS,
                "gridPos": {"x": x, "y": self.y, "w": w, "h": 8},
                "fieldConfig": {
                    "defaults": {
                        "unit": "short",
                        "thresholds": {"mode": "absolute", "steps": steps},
                    },
                    "overrides": [],
                },
                "options": {
                    "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "background",
                    "graphMode": "none",
                    "textMode": "value",
                },
                "targets": [{"refId": "A", "datasource": DS, "expr": expr, "instant": True}],
            }
        )


def q(p: float, metric: str, by: str | None = None) -> str:
    """The p-quantile of histogram ``metric``, optionally by labels."""
    labels = "le" + (", " + by if by else "")
    return f"histogram_quantile({p}, sum by ({labels}) (rate({metric}_bucket{{{NS}}}{R})))"


def build() -> dict[str, Any]:
    b = Board()
    b.row("Runs")
    b.ts(
        "Runs started / ended",
        [
            (f"sum(rate(runplane_executor_runs_started_total{{{NS}}}{R}))", "started"),
            (
                f"sum by (status) (rate(runplane_executor_runs_ended_total{{{NS}}}{R}))",
                "{{status}}",
            ),
        ],
        0,
        12,
        "ops",
        "Runs per second (executor). Ended by status: completed, failed, quarantined.",
    )
    b.stat(
        "Chain breaks",
        f"sum(increase(runplane_chain_breaks_total{{{NS}}}[$__range])) or vector(0)",
        12,
        6,
        "Journal chains that failed verification in the selected range (journal service). Any value is an alert: the run is quarantined.",
    )
    b.stat(
        "Deadline breaches",
        f"sum(increase(runplane_deadline_breaches_total{{{NS}}}[$__range])) or vector(0)",
        18,
        6,
        "Obligations breached in the selected range (cases service; decided by sweep runs).",
    )
    b.next_line()
    b.row("Steps")
    b.ts(
        "Live call latency p50 / p99 by family",
        [
            (q(0.5, "runplane_live_call_seconds", "family"), "p50 {{family}}"),
            (q(0.99, "runplane_live_call_seconds", "family"), "p99 {{family}}"),
        ],
        0,
        12,
        "s",
        "Live effect calls (model, tool, ...), all attempts included. Replayed calls are served from the journal and not counted.",
    )
    b.ts(
        "Live calls by outcome",
        [
            (
                f"sum by (family, outcome) (rate(runplane_live_calls_total{{{NS}}}{R}))",
                "{{family}} {{outcome}}",
            )
        ],
        12,
        6,
        "ops",
    )
    b.ts(
        "Replays, evictions, in doubt",
        [
            (f"sum(rate(runplane_executor_replays_total{{{NS}}}{R}))", "replays"),
            (f"sum(rate(runplane_executor_evictions_total{{{NS}}}{R}))", "evictions"),
            (
                f"sum by (recovery) (rate(runplane_executor_in_doubt_total{{{NS}}}{R}))",
                "in doubt: {{recovery}}",
            ),
        ],
        18,
        6,
        "ops",
    )
    b.next_line()
    b.row("Admission and bad input")
    b.ts(
        "Admissions: admitted / duplicate / refused",
        [
            (f"sum(rate(runplane_admission_admitted_total{{{NS}}}{R}))", "admitted"),
            (f"sum(rate(runplane_admission_duplicates_total{{{NS}}}{R}))", "duplicate"),
            (
                f"sum by (reason) (rate(runplane_admission_refused_total{{{NS}}}{R}))",
                "refused: {{reason}}",
            ),
        ],
        0,
        12,
        "ops",
        "Duplicates are at-most-once admission at work: an emitter retried a key that already has a run.",
    )
    b.ts(
        "Dead letters",
        [
            (
                f"sum by (service, kind) (rate(runplane_processor_deadletters_total{{{NS}}}{R}))",
                "{{service}}: {{kind}}",
            ),
            (
                f"sum by (reason) (rate(runplane_executor_deadletters_total{{{NS}}}{R}))",
                "executor: {{reason}}",
            ),
        ],
        12,
        12,
        "ops",
        "Records that could not be decoded or validated, moved to the deadletter topic with the reason.",
    )
    b.next_line()
    b.row("Kafka")
    b.ts(
        "Consumer lag",
        [
            (f"sum by (service) (runplane_processor_consumer_lag_messages{{{NS}}})", "{{service}}"),
            (f"sum(runplane_executor_consumer_lag_messages{{{NS}}})", "executor"),
            (f"sum(runplane_audit_lag_records{{{NS}}})", "journal (audit)"),
        ],
        0,
        6,
        "short",
        "Records behind the end of the input topics (the executor's drives its optional lag autoscaler).",
    )
    b.ts(
        "Transaction commit p50 / p99",
        [
            (q(0.5, "runplane_processor_commit_seconds", "service"), "p50 {{service}}"),
            (q(0.99, "runplane_processor_commit_seconds", "service"), "p99 {{service}}"),
            (q(0.5, "runplane_executor_txn_commit_seconds"), "p50 executor"),
            (q(0.99, "runplane_executor_txn_commit_seconds"), "p99 executor"),
        ],
        6,
        6,
        "s",
    )
    b.ts(
        "Records per transaction",
        [
            (
                f"sum by (service) (rate(runplane_processor_batch_records_sum{{{NS}}}{R})) / sum by (service) (rate(runplane_processor_batch_records_count{{{NS}}}{R}))",
                "{{service}}",
            ),
            (
                f"sum(rate(runplane_executor_txn_batch_records_sum{{{NS}}}{R})) / sum(rate(runplane_executor_txn_batch_records_count{{{NS}}}{R}))",
                "executor",
            ),
        ],
        12,
        6,
        "short",
        "Average batch: commits are grouped across runs, which is where throughput comes from.",
    )
    b.ts(
        "Aborted transactions",
        [
            (f"sum by (service) (rate(runplane_processor_aborts_total{{{NS}}}{R}))", "{{service}}"),
            (f"sum(rate(runplane_executor_txn_aborts_total{{{NS}}}{R}))", "executor"),
        ],
        18,
        6,
        "ops",
    )
    b.next_line()
    b.row("People, cases, runtimes")
    b.ts(
        "Open tasks by role",
        [(f"sum by (role) (runplane_tasks_open{{{NS}}})", "{{role}}")],
        0,
        6,
        "short",
        "Human tasks waiting on the worklist (open or claimed).",
    )
    b.ts(
        "Task decision time p50 / p90",
        [
            (q(0.5, "runplane_task_decision_seconds", "outcome"), "p50 {{outcome}}"),
            (q(0.9, "runplane_task_decision_seconds", "outcome"), "p90 {{outcome}}"),
        ],
        6,
        6,
        "s",
        "From a task's opening to its final decision, by a person or by expiry.",
    )
    b.ts(
        "Deadline breaches per hour",
        [(f"sum(increase(runplane_deadline_breaches_total{{{NS}}}[1h]))", "breaches / h")],
        12,
        6,
        "short",
    )
    b.ts(
        "Model tokens by capability",
        [
            (
                f"sum by (capability, direction) (rate(runplane_cost_tokens_total{{{NS}}}{R}))",
                "{{capability}} {{direction}}",
            )
        ],
        18,
        6,
        "short",
        "Tokens per second, summed by the journal service from the chains it verifies.",
    )
    b.next_line()
    b.ts(
        "Sweeper index and commands",
        [
            (f"sum(runplane_sweeper_index_entries{{{NS}}})", "pending entries"),
            (
                f"sum by (action) (rate(runplane_sweeper_commands_total{{{NS}}}{R}))",
                "sent: {{action}} /s",
            ),
        ],
        0,
        8,
        "short",
        "Open warn/breach entries in the due-time index, and the decisions sent to cases.commands.",
    )
    b.ts(
        "Open obligations",
        [(f"sum(runplane_obligations_open{{{NS}}})", "open or warned")],
        8,
        8,
        "short",
    )
    b.ts(
        "Executor runtimes by residency",
        [(f"sum by (state) (runplane_executor_runtimes{{{NS}}})", "{{state}}")],
        16,
        8,
        "short",
        "Runs of owned partitions: resident, evicted (rebuilt by replay on their next message), parked.",
    )
    b.next_line()
    return {
        "title": "runplane",
        "uid": "runplane-overview",
        "tags": ["runplane", "kafka"],
        "timezone": "browser",
        "description": "runplane services. Metric names: docs/metrics.md.",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": []},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "namespace",
                    "label": "Namespace",
                    "type": "query",
                    "datasource": DS,
                    "query": {
                        "query": "label_values(runplane_processor_messages_total, namespace)",
                        "refId": "ns",
                    },
                    "definition": "label_values(runplane_processor_messages_total, namespace)",
                    "includeAll": True,
                    "allValue": ".*",
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                    "hide": 0,
                },
            ]
        },
        "panels": b.panels,
    }


def main() -> None:
    OUT.write_text(json.dumps(build(), indent=2) + "\n")


if __name__ == "__main__":
    main()
