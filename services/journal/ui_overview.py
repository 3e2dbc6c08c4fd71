"""The runs UI's overview: what the run index says about many runs at once, drawn as SVG.

``GET /ui/overview`` (``services.journal.ui``) reads the newest runs of the caller's tenant from
the same index the runs list reads (at most ``OVERVIEW_LIMIT``, optionally within a start
window) and draws three charts on the server, as inline SVG — no script, no chart library and
no asset from anywhere but this page, so it renders offline and under the pages' strict CSP
(colours come from classes in ``journal.css``; the CSP forbids ``style`` attributes):

- runs by status over time: the window cut into equal slots by start time, one stacked bar
  per slot, a segment per status;
- duration per capability: the p50 and p99 of the ended runs' durations (end minus start);
- cost per capability: cost units summed over the runs shown, tokens beside them.

The numbers are folded here (pure functions over :class:`RunSummary` values); the SVG is text
with every label escaped. Each chart carries a ``<title>`` per mark, so a reader hovering a bar
(or a test) reads the exact number.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from runplane.journal.summary import TERMINAL, CostTotals, RunSummary
from runplane.web import e
from runplane.wire import RunStatus

__all__ = [
    "OVERVIEW_LIMIT",
    "CapabilityStats",
    "StatusSlot",
    "by_capability",
    "cost_chart",
    "duration_chart",
    "duration_text",
    "percentile",
    "status_chart",
    "status_class",
    "status_slots",
]

# The overview folds at most this many runs (newest first): one index page of summaries is
# small, and a chart of more would be read from metrics (runplane_executor_runs_ended_total).
OVERVIEW_LIMIT = 2000
SLOTS = 24

# How a status is drawn, in the list and the charts alike: failures red, waits amber, a
# cancelled run its own grey (an operator ended it on purpose: not a failure).
_STATUS_CLASS: Mapping[RunStatus, str] = {
    RunStatus.COMPLETED: "ok",
    RunStatus.FAILED: "bad",
    RunStatus.QUARANTINED: "bad",
    RunStatus.AWAITING_HUMAN: "wait",
    RunStatus.PARKED: "wait",
    RunStatus.QUEUED: "wait",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.ADMITTED: "live",
    RunStatus.RUNNING: "live",
}


def status_class(status: RunStatus | None) -> str:
    """The CSS class suffix of a status (``badge-…``, ``run-…``, ``s-…``); "" for none."""
    return "" if status is None else _STATUS_CLASS.get(status, "")


def percentile(values: Sequence[int], q: float) -> int:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of a non-empty sequence: always one
    of the values, so a p99 of 40 runs is the slowest run, not an interpolation."""
    if not values:
        raise ValueError("a percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is outside (0, 100]")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class StatusSlot:
    """Runs started in [start_ms, end_ms), counted by status."""

    start_ms: int
    end_ms: int
    counts: Mapping[RunStatus, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def status_slots(runs: Iterable[RunSummary], slots: int = SLOTS) -> list[StatusSlot]:
    """The runs with a start time, cut into ``slots`` equal slots from the first start to the
    last (the last slot includes its end); [] when no run has a start time."""
    started = [(r.started_ms, r.status) for r in runs if r.started_ms is not None]
    if not started:
        return []
    lo = min(ms for ms, _ in started)
    hi = max(ms for ms, _ in started)
    width = max(1, math.ceil((hi - lo + 1) / slots))
    counts: list[dict[RunStatus, int]] = [{} for _ in range(slots)]
    for ms, status in started:
        if status is None:
            continue
        i = min(slots - 1, (ms - lo) // width)
        counts[i][status] = counts[i].get(status, 0) + 1
    return [StatusSlot(lo + i * width, lo + (i + 1) * width, counts[i]) for i in range(slots)]


@dataclass(frozen=True)
class CapabilityStats:
    """One capability's runs in the overview: how many, how long the ended ones took, cost."""

    capability: str
    runs: int
    ended: int
    p50_ms: int | None
    p99_ms: int | None
    cost: CostTotals


def by_capability(runs: Iterable[RunSummary]) -> list[CapabilityStats]:
    """Per capability (by name; a run without one under "—"), the duration percentiles of its
    ended runs and the cost summed over all its runs."""
    grouped: dict[str, list[RunSummary]] = {}
    for r in runs:
        grouped.setdefault(r.capability or "—", []).append(r)
    out = []
    for name, group in sorted(grouped.items()):
        durations = [
            r.ended_ms - r.started_ms
            for r in group
            if r.status in TERMINAL and r.ended_ms is not None and r.started_ms is not None
        ]
        cost = CostTotals()
        for r in group:
            cost = CostTotals(
                cost.tokens_in + r.cost.tokens_in,
                cost.tokens_out + r.cost.tokens_out,
                cost.units + r.cost.units,
            )
        out.append(
            CapabilityStats(
                name,
                len(group),
                len(durations),
                percentile(durations, 50) if durations else None,
                percentile(durations, 99) if durations else None,
                cost,
            )
        )
    return out


def duration_text(ms: int) -> str:
    """A duration as a person reads it: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


# --- drawing -----------------------------------------------------------------------------------

_W, _H, _LEFT, _BOTTOM, _TOP = 640, 220, 36, 28, 10
_ROW, _LABEL_W, _BAR_W, _TEXT_W = 34, 150, 340, 230


def _svg(label: str, width: int, height: int, inner: str) -> str:
    # A viewBox and no fixed size: the chart scales to its column (420 px phones included).
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{e(label)}" xmlns="http://www.w3.org/2000/svg">{inner}</svg>'
    )


def _stamp(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%m-%d %H:%M")


def status_chart(slots: Sequence[StatusSlot]) -> str:
    """Stacked bars of runs per status per slot, with a y axis of run counts."""
    if not slots:
        return '<p class="note">No runs with a start time.</p>'
    peak = max(1, max(s.total for s in slots))
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP
    step = plot_w / len(slots)
    marks = []
    for i, slot in enumerate(slots):
        y = float(_TOP + plot_h)
        for status in RunStatus:
            n = slot.counts.get(status, 0)
            if not n:
                continue
            h = n / peak * plot_h
            y -= h
            marks.append(
                f'<rect class="s-{status_class(status)}" data-status="{e(status)}" '
                f'x="{_LEFT + i * step + 1:.1f}" y="{y:.1f}" width="{max(1.0, step - 2):.1f}" '
                f'height="{h:.1f}"><title>{n} {e(status)}, started {_stamp(slot.start_ms)}'
                f"–{_stamp(slot.end_ms)} UTC</title></rect>"
            )
    axis = (
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_W - 8}" '
        f'y2="{_TOP + plot_h}"/>'
        f'<text class="tick" x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">{peak}</text>'
        f'<text class="tick" x="{_LEFT - 4}" y="{_TOP + plot_h}" text-anchor="end">0</text>'
        f'<text class="tick" x="{_LEFT}" y="{_H - 8}">{_stamp(slots[0].start_ms)}</text>'
        f'<text class="tick" x="{_W - 8}" y="{_H - 8}" text-anchor="end">'
        f"{_stamp(slots[-1].end_ms)} UTC</text>"
    )
    return _svg("Runs by status over time", _W, _H, axis + "".join(marks)) + _legend(slots)


def _legend(slots: Sequence[StatusSlot]) -> str:
    seen = [s for s in RunStatus if any(slot.counts.get(s) for slot in slots)]
    items = "".join(
        f'<li><span class="swatch s-{status_class(s)}"></span>{e(s)} '
        f"<strong>{sum(slot.counts.get(s, 0) for slot in slots)}</strong></li>"
        for s in seen
    )
    return f'<ul class="legend">{items}</ul>'


def _bars(label: str, rows: Sequence[tuple[str, Sequence[tuple[str, float, str]], str]]) -> str:
    """Horizontal bars: per row (name, [(css class, value, title)], text at the end)."""
    peak = max((v for _, marks, _ in rows for _, v, _ in marks), default=0.0) or 1.0
    height = _ROW * len(rows) + 8
    width = _LABEL_W + _BAR_W + _TEXT_W
    out = []
    for i, (name, marks, text) in enumerate(rows):
        y = 4 + i * _ROW
        short = name if len(name) <= 22 else name[:21] + "…"
        out.append(
            f'<text class="name" x="{_LABEL_W - 8}" y="{y + 18}" text-anchor="end">'
            f"<title>{e(name)}</title>{e(short)}</text>"
        )
        for j, (cls, value, title) in enumerate(marks):
            bar = value / peak * _BAR_W
            thick = 22 if len(marks) == 1 else 11
            out.append(
                f'<rect class="{cls}" x="{_LABEL_W}" y="{y + 2 + j * 11}" '
                f'width="{max(1.0, bar):.1f}" height="{thick}"><title>{e(title)}</title></rect>'
            )
        out.append(f'<text class="value" x="{_LABEL_W + _BAR_W + 8}" y="{y + 18}">{e(text)}</text>')
    return _svg(label, width, height, "".join(out))


def duration_chart(stats: Sequence[CapabilityStats]) -> str:
    """p50 and p99 of each capability's ended runs, as paired bars."""
    rows = [
        (
            s.capability,
            [
                ("p50", float(s.p50_ms), f"{s.capability} p50 {duration_text(s.p50_ms)}"),
                ("p99", float(s.p99_ms), f"{s.capability} p99 {duration_text(s.p99_ms)}"),
            ],
            f"p50 {duration_text(s.p50_ms)} · p99 {duration_text(s.p99_ms)}",
        )
        for s in stats
        if s.p50_ms is not None and s.p99_ms is not None
    ]
    if not rows:
        return '<p class="note">No ended runs yet.</p>'
    legend = (
        '<ul class="legend"><li><span class="swatch p50"></span>p50</li>'
        '<li><span class="swatch p99"></span>p99</li></ul>'
    )
    return _bars("Duration per capability", rows) + legend


def cost_chart(stats: Sequence[CapabilityStats]) -> str:
    """Cost units per capability, tokens in and out as the bar's text."""
    rows = [
        (
            s.capability,
            [("cost", s.cost.units, f"{s.capability} {s.cost.units:g} units")],
            f"{s.cost.units:g} units · {s.cost.tokens_in}/{s.cost.tokens_out} tokens",
        )
        for s in stats
        if s.cost.units or s.cost.tokens
    ]
    if not rows:
        return '<p class="note">No cost recorded.</p>'
    return _bars("Cost per capability", rows)
