"""The benchmark report: results of one ``python -m benchmarks`` run → Markdown and a PNG plot.

Pure rendering: :func:`render_markdown` takes the results dict that ``benchmarks/__main__.py``
collected and returns text; :func:`render_plot` draws with matplotlib's Agg backend. Nothing
here measures or asserts anything, and every number shown comes from the dict.

Results shape::

    {
      "started": "2025-…Z", "elapsed_s": 123.4,
      "machine": {"cpu": …, "cores": 2, "memory_gib": 24.0, "python": …, "kafka": …, …},
      "benchmarks": {
        "core":      {"ok": true, "seconds": 3.1, "result": {"replay": {10: {…}, …}, …}},
        "executor":  {"ok": true, "seconds": 60.0, "result": {"executor": {…}, "baseline": {…}}},
        "admission": {"ok": false, "seconds": 0.1, "error": "…"},
      },
    }

Baselines: a plain confluent-kafka transactional consume→produce loop (read_committed
consumer, one transactional producer, ``send_offsets_to_transaction`` with the group metadata),
measured in the same run by the benchmark it is compared with — ``benchmarks.executor`` writes
per input as many records as the executor writes per run, ``benchmarks.admission`` one record
per input — so each ratio compares like with like. A benchmark without its own baseline is
compared with the executor's. Every throughput (a leaf named ``*_per_s``) is divided by the
baseline's messages/s, every latency (``*p50_ms`` / ``*p99_ms``) by the baseline's latency at
the same percentile; offered loads (``paced_*``) get no ratio.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard

Leaf = tuple[str, float]


def own_baseline(results: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The baseline benchmark ``name`` measured itself, or None (failed, or it has none)."""
    entry = results.get("benchmarks", {}).get(name, {})
    result = entry.get("result") if entry.get("ok") else None
    if not isinstance(result, Mapping):
        return None
    base = result.get("baseline")
    return base if isinstance(base, Mapping) and _num(base.get("messages_per_s")) else None


def baseline_of(results: Mapping[str, Any], name: str = "executor") -> Mapping[str, Any] | None:
    """The baseline benchmark ``name`` is compared with: its own, else the executor's."""
    return own_baseline(results, name) or own_baseline(results, "executor")


def _num(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def leaves(data: Any, prefix: str = "") -> Iterator[Leaf]:
    """Every finite number in ``data`` as (dotted path, value), in insertion order."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif _num(data):
        yield prefix, float(data)


def ratio(path: str, value: float, baseline: Mapping[str, Any] | None) -> float | None:
    """``value`` relative to the baseline figure of the same kind, when there is one."""
    if baseline is None:
        return None
    name = path.rsplit(".", 1)[-1]
    if "paced" in name:
        return None  # a chosen offered load (half the max), not a measured capacity
    if name.endswith("_per_s"):
        ref = baseline.get("messages_per_s")
    elif name.endswith("p50_ms"):
        ref = baseline.get("p50_ms")
    elif name.endswith("p99_ms"):
        ref = baseline.get("p99_ms")
    else:
        return None
    return value / float(ref) if _num(ref) and float(ref) > 0 else None


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    if abs(value) >= 0.001:
        return f"{value:.4f}"
    return f"{value:.2e}"


def _ratio_cell(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}×"


# -- sections ---------------------------------------------------------------------------------


def _machine(machine: Mapping[str, Any]) -> list[str]:
    labels = [
        ("cpu", "CPU"),
        ("cores", "cores"),
        ("memory_gib", "memory (GiB)"),
        ("os", "OS"),
        ("python", "Python"),
        ("kafka", "Kafka"),
        ("confluent_kafka", "confluent-kafka / librdkafka"),
        ("commit", "commit"),
    ]
    out = ["| | |", "| --- | --- |"]
    out += [f"| {label} | {machine[key]} |" for key, label in labels if key in machine]
    return out


def _core(result: Mapping[str, Any]) -> list[str]:
    replay = result.get("replay", {})
    out = ["| calls replayed | total (ms) | per step (µs) |", "| ---: | ---: | ---: |"]
    for n, row in replay.items():
        out.append(
            f"| {int(n):,} | {_fmt(float(row['total_ms']))} | {_fmt(float(row['per_step_us']))} |"
        )
    sizes = sorted(replay, key=int)
    if len(sizes) >= 2:
        # Compare the two longest histories: the shortest carries the restore's fixed cost.
        small = float(replay[sizes[-2]]["per_step_us"])
        large = float(replay[sizes[-1]]["per_step_us"])
        if small > 0:
            out.append("")
            out.append(
                f"Per-step cost at {int(sizes[-1]):,} calls is {large / small:.2f}× the cost at "
                f"{int(sizes[-2]):,} (1.00× = linear replay)."
            )
    if _num(result.get("live_step_us")):
        out.append(f"Live step without I/O: {_fmt(float(result['live_step_us']))} µs.")
    thousand = replay.get(1000) or replay.get("1000")
    goal = result.get("goal_1000_ms")
    if thousand is not None and _num(goal):
        verdict = "meets" if float(thousand["total_ms"]) < float(goal) else "misses"
        out.append(
            f"Replaying 1,000 calls: {_fmt(float(thousand['total_ms']))} ms ({verdict} the {_fmt(float(goal))} ms goal)."
        )
    return out


def _derived(result: Mapping[str, Any]) -> list[str]:
    """The benchmark's own ratio_* figures (computed by it, shown as given)."""
    rows = [(k, float(v)) for k, v in result.items() if k.startswith("ratio_") and _num(v)]
    return (
        ["", *(f"{k.removeprefix('ratio_').replace('_', ' ')}: {_fmt(v)}" for k, v in rows)]
        if rows
        else []
    )


def _table(
    result: Mapping[str, Any], baseline: Mapping[str, Any] | None, *, skip: tuple[str, ...] = ()
) -> list[str]:
    out = ["| measure | value | vs. baseline |", "| --- | ---: | ---: |"]
    for path, value in leaves({k: v for k, v in result.items() if k not in skip}):
        out.append(f"| {path} | {_fmt(value)} | {_ratio_cell(ratio(path, value, baseline))} |")
    return out


_BASELINE_TEXT = {
    "executor": "writing per input as many records as the executor writes per run",
    "admission": "writing one record per input",
}


def _baselines(results: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for name in results.get("benchmarks", {}):
        base = own_baseline(results, name)
        if base is None:
            continue
        out += [
            "",
            f"**Measured by the {name} benchmark** ({_BASELINE_TEXT.get(name, 'its own workload shape')}):",
            "",
            "| measure | value |",
            "| --- | ---: |",
            *(f"| {path} | {_fmt(value)} |" for path, value in leaves(base)),
        ]
    if not out:
        return ["No baseline in this run (the benchmarks that measure one did not finish)."]
    intro = (
        "A plain confluent-kafka loop with the services' transactional discipline "
        "(read_committed consumer, one transactional producer, `send_offsets_to_transaction` "
        "with the group metadata) — Kafka I/O with no runplane in it. Each section's ratios are "
        "against the baseline measured with its own workload shape."
    )
    return [intro, *out]


_HOPS = {
    "emit_to_admission_output": "emit → admission produced StartRun (fetch, batch window, handler)",
    "admission_commit": "StartRun produced → readable (admission's commit)",
    "executor_run": "StartRun readable → COMPLETED produced (executor fetch, window, the steps)",
    "executor_last_commit": "COMPLETED produced → readable (executor's commit)",
    "total": "the whole run, emit → COMPLETED readable",
}


def _e2e_row(workload: str, lv: Mapping[str, Any], raw: Mapping[str, Any] | None) -> str:
    cells = [workload, str(lv["in_flight"]), _fmt(lv["p50_ms"]), _fmt(lv["p99_ms"])]
    cells.append(_fmt(lv["runs_per_s"]))
    if raw is None:
        return "| " + " | ".join([*cells, "", "", "", "", ""]) + " |"
    cells += [_fmt(raw["p50_ms"]), _fmt(raw["p99_ms"]), _fmt(raw["runs_per_s"])]
    cells.append(_ratio_cell(lv["p50_ms"] / raw["p50_ms"] if raw["p50_ms"] else None))
    cells.append(_ratio_cell(lv["runs_per_s"] / raw["runs_per_s"] if raw["runs_per_s"] else None))
    return "| " + " | ".join(cells) + " |"


def _cpu_lines(result: Mapping[str, Any]) -> list[str]:
    """CPU per run by process (``cpu_ms_per_run`` of each level), when it was measured."""
    rows = [
        (workload, lv)
        for workload, data in result.items()
        if isinstance(data, Mapping) and "levels" in data
        for lv in data["levels"]
        if lv.get("cpu_ms_per_run")
    ]
    if not rows:
        return []
    names = list(dict.fromkeys(n for _, lv in rows for n in lv["cpu_ms_per_run"]))
    out = [
        "",
        "CPU per run, ms, by process (user + system time from /proc over the level, divided "
        "by its runs; the machine has the cores listed above):",
        "",
        "| agent | in flight | " + " | ".join(names) + " | all |",
        "| --- | ---: | " + " | ".join("---:" for _ in names) + " | ---: |",
    ]
    for workload, lv in rows:
        cpu = lv["cpu_ms_per_run"]
        cells = [_fmt(cpu[n]) if n in cpu else "" for n in names]
        out.append(
            f"| {workload} | {lv['in_flight']} | "
            + " | ".join(cells)
            + f" | {_fmt(sum(cpu.values()))} |"
        )
    return out


def e2e_lines(result: Mapping[str, Any]) -> list[str]:
    """The end-to-end table (runplane beside the raw path, level by level) and its hops."""
    raw = {lv["in_flight"]: lv for lv in result.get("raw_kafka", {}).get("levels", [])}
    out = [
        "| agent | in flight | p50 ms | p99 ms | runs/s | raw p50 | raw p99 | raw/s "
        "| p50 ÷ raw | runs/s ÷ raw |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    warm = []
    for workload, data in result.items():
        if not isinstance(data, Mapping) or "levels" not in data:
            continue
        if workload != "raw_kafka":
            out += [_e2e_row(workload, lv, raw.get(lv["in_flight"])) for lv in data["levels"]]
        warm.append(f"{workload} {_fmt(data.get('warm_up_runs_per_s', 0))}")
    out += ["", f"First runs (warm-up, 16 in flight), runs/s: {', '.join(warm)}."]
    runs = result.get("raw_kafka_runs", {})
    if runs:
        seen = {
            when: ", ".join(f"{lv['in_flight']}: {_fmt(lv['runs_per_s'])}" for lv in r["levels"])
            for when, r in runs.items()
        }
        out += [
            "",
            "The raw path was measured before runplane and again after it (runs/s by in "
            f"flight — before: {seen.get('first', '-')}; after: {seen.get('last', '-')}); "
            "the ratios use the faster of the two at each level.",
        ]
    out += _cpu_lines(result)
    hops = result.get("hops_ms_lone_step3", {})
    if hops:
        out += ["", "Where a lone 3-step run's time goes (medians, ms):", ""]
        out += ["| hop | ms |", "| --- | ---: |"]
        out += [f"| {_HOPS.get(k, k)} | {_fmt(float(v))} |" for k, v in hops.items()]
    return out


def render_markdown(results: Mapping[str, Any]) -> str:
    """The whole report."""
    benches: Mapping[str, Any] = results.get("benchmarks", {})
    lines = [
        "# runplane benchmarks",
        "",
        f"Run started {results.get('started', '?')}, took {_fmt(float(results.get('elapsed_s', 0)))} s. "
        "Every number below comes from this one run (`make bench`).",
        "",
        "## Machine",
        "",
        *_machine(results.get("machine", {})),
        "",
        "## Raw-Kafka baselines",
        "",
        *_baselines(results),
    ]
    titles = {
        "core": "Durable core: replay cost (no I/O)",
        "executor": "Executor: steps/s and admission-to-completion latency",
        "admission": "Admission: admissions/s with 0% and 50% duplicates",
        "e2e": "End to end: emit → COMPLETED, beside the raw-Kafka path",
        "retention": "Results retention: restore of 10,000 ended + 1,000 live runs",
        "parked": "Parked runs at scale: executor memory and restore after a kill",
        "fanout": "Fan-out: N slow tool calls in one run, at once vs in sequence (the baseline)",
        "announce": "Announce before act: a lone generation (two commits) vs a lone read (one)",
        "loop": "Agent loop: overhead per turn and per tool call beside bare generate/tool calls",
        "stream": "Live streams: token → SSE client, 200 runs watched at once, streamed vs not",
        "timers": "The timer turn: a scan of every parked snapshot vs the timer index",
        "txn": "One transaction, phase by phase: back to back, with the old backoff, spaced out",
    }
    for name, entry in benches.items():
        lines += ["", f"## {titles.get(name, name)}", ""]
        if not entry.get("ok"):
            lines.append(
                f"**Did not finish** after {_fmt(float(entry.get('seconds', 0)))} s: `{entry.get('error', 'unknown error')}`"
            )
            continue
        result = entry.get("result", {})
        baseline = baseline_of(results, name)
        if name == "core":
            lines += _core(result)
        elif name == "e2e":
            lines += e2e_lines(result)
        elif name == "executor":
            lines += _table(result.get("executor", {}), baseline)
            lines += _derived(result)
            profile = result.get("executor", {}).get("profile_top")
            if profile:
                lines += [
                    "",
                    "Where the executor's time goes (cProfile, by own time):",
                    "",
                    "```",
                    *profile,
                    "```",
                ]
        else:
            # Its own baseline is listed above; its own ratio_* figures are shown as given.
            lines += _table(result, baseline, skip=("baseline",))
        lines.append(f"\n_{_fmt(float(entry.get('seconds', 0)))} s._")
    return "\n".join(lines) + "\n"


# -- plot -------------------------------------------------------------------------------------


def plot_series(results: Mapping[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """What the plot shows: throughput (per s), latency (ms) and replay per step (µs)."""
    throughput: list[tuple[str, float]] = []
    latency: list[tuple[str, float]] = []
    for name, entry in results.get("benchmarks", {}).items():
        if not entry.get("ok") or name in ("core", "e2e", "txn"):
            continue
        for path, value in leaves(entry.get("result", {})):
            if path.startswith("baseline."):
                label = f"raw Kafka baseline ({name}): {path.removeprefix('baseline.')}"
            else:
                label = f"{name}: {path.removeprefix(name + '.')}"
            leaf = path.rsplit(".", 1)[-1]
            if leaf.endswith("_per_s") and "paced" not in leaf:
                throughput.append((label, value))
            elif leaf.endswith(("p50_ms", "p99_ms")):
                latency.append((label, value))
    replay: list[tuple[str, float]] = []
    core = results.get("benchmarks", {}).get("core", {})
    if core.get("ok"):
        for n, row in core.get("result", {}).get("replay", {}).items():
            replay.append((f"{int(n):,}", float(row["per_step_us"])))
    return {"throughput": throughput, "latency": latency, "replay": replay}


def curve_series(results: Mapping[str, Any]) -> dict[str, list[tuple[float, float, float]]]:
    """Latency against throughput: per agent (and the raw path), (runs/s, p50, p99) points."""
    entry = results.get("benchmarks", {}).get("e2e", {})
    if not entry.get("ok"):
        return {}
    out: dict[str, list[tuple[float, float, float]]] = {}
    for name, data in entry.get("result", {}).items():
        if isinstance(data, Mapping) and "levels" in data:
            out[name] = [
                (float(lv["runs_per_s"]), float(lv["p50_ms"]), float(lv["p99_ms"]))
                for lv in data["levels"]
            ]
    return out


def _curve(ax: Any, curves: Mapping[str, list[tuple[float, float, float]]]) -> None:
    ax.set_title("end to end: latency vs runs/s", fontsize=10)
    for name, points in curves.items():
        xs, p50, p99 = zip(*points, strict=True)
        color = "#888888" if name == "raw_kafka" else None
        (line,) = ax.plot(xs, p50, marker="o", color=color, label=f"{name} p50")
        ax.plot(xs, p99, marker="x", linestyle="--", color=line.get_color(), label=f"{name} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("runs/s (1, 16, 200 in flight)")
    ax.set_ylabel("ms")
    ax.legend(fontsize=7)


def render_plot(results: Mapping[str, Any], path: Path) -> None:
    """Write the PNG (matplotlib Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    series = plot_series(results)
    curves = curve_series(results)
    widths = [3, 3, 2, 3] if curves else [3, 3, 2]
    fig, all_axes = plt.subplots(
        1, len(widths), figsize=(5.3 * len(widths), 5.5), gridspec_kw={"width_ratios": widths}
    )
    axes = all_axes[:3]
    if curves:
        _curve(all_axes[3], curves)
    panels = (
        ("throughput", "throughput (per second, log)", True),
        ("latency", "latency (ms, log)", True),
        ("replay", "core replay per step (µs)", False),
    )
    for ax, (key, title, log) in zip(axes, panels, strict=True):
        data = series[key]
        ax.set_title(title, fontsize=10)
        if not data:
            ax.text(
                0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes
            )
            ax.set_axis_off()
            continue
        labels, values = zip(*data, strict=True)
        colors = ["#888888" if "baseline" in lab else "#1f77b4" for lab in labels]
        if key == "replay":
            ax.bar(labels, values, color="#2ca02c")
            ax.set_xlabel("calls in history")
        else:
            ax.barh(labels, values, color=colors)
            ax.invert_yaxis()
            ax.tick_params(axis="y", labelsize=8)
        if log:
            ax.set_xscale("log")
            # Bars of a log axis start at its left edge: put it well below the smallest value
            # so every bar is visible and lengths compare by ratio.
            ax.set_xlim(left=min(values) / 4, right=max(values) * 3)
            ax.xaxis.set_minor_formatter(NullFormatter())
        for i, v in enumerate(values):
            if key == "replay":
                ax.annotate(_fmt(v), (i, v), ha="center", va="bottom", fontsize=8)
            else:
                ax.annotate(f" {_fmt(v)}", (v, i), va="center", fontsize=8)
    fig.suptitle(
        f"runplane benchmarks — {results.get('started', '')} — grey: raw-Kafka baseline",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
