"""The benchmark report renders the numbers it is given, with ratios to the one baseline."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from benchmarks.report import (
    baseline_of,
    curve_series,
    leaves,
    plot_series,
    ratio,
    render_markdown,
    render_plot,
)


def _results() -> dict[str, Any]:
    return {
        "started": "2030-01-02 03:04:05Z",
        "elapsed_s": 321.5,
        "machine": {
            "cpu": "Test CPU @ 3GHz",
            "cores": 2,
            "memory_gib": 23.4,
            "python": "3.11.9",
            "kafka": "4.1.1",
        },
        "benchmarks": {
            "core": {
                "ok": True,
                "seconds": 4.0,
                "result": {
                    "replay": {
                        10: {"total_ms": 0.08, "per_step_us": 8.0},
                        1000: {"total_ms": 7.0, "per_step_us": 7.0},
                        100000: {"total_ms": 900.0, "per_step_us": 9.0},
                    },
                    "live_step_us": 170.0,
                    "goal_1000_ms": 20.0,
                },
            },
            "executor": {
                "ok": True,
                "seconds": 80.0,
                "result": {
                    "executor": {
                        "completed_runs_per_s": 150.0,
                        "effect_steps_per_s": 750.0,
                        "p50_ms": 40.0,
                        "p99_ms": 120.0,
                    },
                    "baseline": {
                        "messages_per_s": 600.0,
                        "p50_ms": 10.0,
                        "p99_ms": 30.0,
                        "records_per_message": 12,
                    },
                },
            },
            "admission": {
                "ok": True,
                "seconds": 30.0,
                "result": {
                    "baseline": {"messages_per_s": 1500.0},
                    "dup_0": {"admissions_per_s": 300.0, "p99_ms": 60.0},
                    "dup_50": {"admissions_per_s": 450.0},
                    "ratio_no_duplicates_vs_baseline": 0.2,
                },
            },
        },
    }


def test_each_benchmark_is_compared_with_its_own_baseline_else_the_executors() -> None:
    results = _results()
    assert baseline_of(results, "admission") == {"messages_per_s": 1500.0}
    del results["benchmarks"]["admission"]["result"]["baseline"]
    fallback = baseline_of(results, "admission")
    assert fallback is not None and fallback["messages_per_s"] == 600.0
    base = baseline_of(results, "executor")
    assert base is not None and base["messages_per_s"] == 600.0
    assert ratio("executor.completed_runs_per_s", 150.0, base) == pytest.approx(0.25)
    assert ratio("dup_0.p99_ms", 60.0, base) == pytest.approx(2.0)
    assert ratio("executor.p50_ms", 40.0, base) == pytest.approx(4.0)
    assert ratio("records_per_run", 12.0, base) is None  # not a throughput or a latency
    assert ratio("executor.paced_runs_per_s", 75.0, base) is None  # an offered load


def test_markdown_has_every_number_ratio_and_the_machine() -> None:
    md = render_markdown(_results())
    assert "| CPU | Test CPU @ 3GHz |" in md and "| cores | 2 |" in md and "| Kafka | 4.1.1 |" in md
    assert "2030-01-02 03:04:05Z" in md
    # executor: 150 runs/s ÷ 600 msgs/s; p99 120 ÷ 30
    assert "| completed_runs_per_s | 150.0 | 0.25× |" in md
    assert "| effect_steps_per_s | 750.0 | 1.25× |" in md
    assert "| p99_ms | 120.0 | 4.00× |" in md
    # admission, nested results, against its own baseline (1,500/s; it has no latency → none)
    assert "| dup_0.admissions_per_s | 300.0 | 0.20× |" in md
    assert "| dup_50.admissions_per_s | 450.0 | 0.30× |" in md
    assert "| dup_0.p99_ms | 60.0 |  |" in md
    assert "| ratio_no_duplicates_vs_baseline | 0.20 |  |" in md
    # both baselines listed, the admission's not repeated in its own table
    assert (
        "**Measured by the executor benchmark**" in md
        and "**Measured by the admission benchmark**" in md
    )
    assert "| baseline.messages_per_s |" not in md
    # core: linearity ratio and the goal
    assert "| 100,000 | 900.0 | 9.00 |" in md
    assert "| 10 | 0.0800 | 8.00 |" in md
    assert "is 1.29× the cost at 1,000" in md
    assert "meets the 20.0 ms goal" in md


def test_a_failed_benchmark_is_reported_and_without_the_executor_there_are_no_ratios() -> None:
    results = _results()
    results["benchmarks"]["executor"] = {
        "ok": False,
        "seconds": 2.0,
        "error": "TimeoutError: 3 runs did not complete",
    }
    del results["benchmarks"]["admission"]["result"]["baseline"]
    md = render_markdown(results)
    assert "**Did not finish** after 2.00 s: `TimeoutError: 3 runs did not complete`" in md
    assert "No baseline in this run" in md
    assert "| dup_0.admissions_per_s | 300.0 |  |" in md
    assert baseline_of(results, "admission") is None


def test_numbers_change_the_report() -> None:
    results = _results()
    slower = copy.deepcopy(results)
    slower["benchmarks"]["executor"]["result"]["executor"]["completed_runs_per_s"] = 60.0
    md = render_markdown(slower)
    assert "| completed_runs_per_s | 60.0 | 0.10× |" in md
    assert render_markdown(results) != md


def test_leaves_skip_non_numbers_and_booleans() -> None:
    data = {"a": 1, "b": {"c": 2.5, "d": "x", "e": True, "f": float("nan")}, "g": ["list"]}
    assert list(leaves(data)) == [("a", 1.0), ("b.c", 2.5)]


def test_plot_series_and_png(tmp_path: Path) -> None:
    results = _results()
    series = plot_series(results)
    assert ("executor: completed_runs_per_s", 150.0) in series["throughput"]
    assert ("raw Kafka baseline (executor): messages_per_s", 600.0) in series["throughput"]
    assert ("raw Kafka baseline (admission): messages_per_s", 1500.0) in series["throughput"]
    assert ("admission: dup_50.admissions_per_s", 450.0) in series["throughput"]
    assert ("admission: dup_0.p99_ms", 60.0) in series["latency"]
    assert [label for label, _ in series["replay"]] == ["10", "1,000", "100,000"]
    out = tmp_path / "plot.png"
    render_plot(results, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _with_e2e() -> dict[str, Any]:
    results = _results()
    level = {"in_flight": 1, "runs": 100, "p50_ms": 40.0, "p99_ms": 80.0, "runs_per_s": 25.0}
    busy = {"in_flight": 200, "runs": 2000, "p50_ms": 400.0, "p99_ms": 900.0, "runs_per_s": 500.0}
    raw = {"in_flight": 1, "runs": 100, "p50_ms": 8.0, "p99_ms": 20.0, "runs_per_s": 100.0}
    raw_busy = {"in_flight": 200, "runs": 2000, "p50_ms": 100.0, "p99_ms": 200.0}
    results["benchmarks"]["e2e"] = {
        "ok": True,
        "seconds": 60.0,
        "result": {
            "step3": {"warm_up_runs_per_s": 30.0, "levels": [level, busy]},
            "hops_ms_lone_step3": {"admission_commit": 5.5, "executor_run": 3.0},
            "raw_kafka": {
                "warm_up_runs_per_s": 90.0,
                "levels": [raw, {**raw_busy, "runs_per_s": 2000.0}],
            },
        },
    }
    return results


def test_e2e_levels_sit_beside_the_raw_path_with_ratios() -> None:
    md = render_markdown(_with_e2e())
    assert "## End to end: emit → COMPLETED, beside the raw-Kafka path" in md
    # p50 40 ÷ 8; 25 runs/s ÷ 100
    assert "| step3 | 1 | 40.0 | 80.0 | 25.0 | 8.00 | 20.0 | 100.0 | 5.00× | 0.25× |" in md
    assert "| step3 | 200 | 400.0 | 900.0 | 500.0 | 100.0 | 200.0 | 2,000 | 4.00× | 0.25× |" in md
    assert "runs/s: step3 30.0, raw_kafka 90.0." in md
    assert "| StartRun produced → readable (admission's commit) | 5.50 |" in md
    # the e2e figures are not repeated as bars of the other panels
    assert not any(label.startswith("e2e") for label, _ in plot_series(_with_e2e())["latency"])


def test_the_plot_has_latency_against_throughput(tmp_path: Path) -> None:
    results = _with_e2e()
    curves = curve_series(results)
    assert curves["step3"] == [(25.0, 40.0, 80.0), (500.0, 400.0, 900.0)]
    assert curves["raw_kafka"][1] == (2000.0, 100.0, 200.0)
    out = tmp_path / "plot.png"
    render_plot(results, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results["benchmarks"]["e2e"]["ok"] = False
    assert curve_series(results) == {}


def test_raw_baseline_is_the_faster_of_before_and_after_per_level() -> None:
    from benchmarks.e2e import _better

    def level(n: int, rate: float) -> dict[str, Any]:
        return {"in_flight": n, "runs": 10, "p50_ms": 1.0, "p99_ms": 2.0, "runs_per_s": rate}

    first = {"warm_up_runs_per_s": 1.0, "levels": [level(1, 100.0), level(16, 600.0)]}
    last = {"warm_up_runs_per_s": 2.0, "levels": [level(1, 90.0), level(16, 900.0)]}
    best = _better(first, last)
    assert [lv["runs_per_s"] for lv in best["levels"]] == [100.0, 900.0]


def test_cpu_per_run_table_lists_every_process_measured() -> None:
    from benchmarks.report import e2e_lines

    lv = {"in_flight": 16, "runs": 10, "p50_ms": 1.0, "p99_ms": 2.0, "runs_per_s": 5.0}
    result = {
        "step3 · processes": {
            "warm_up_runs_per_s": 1.0,
            "levels": [{**lv, "cpu_ms_per_run": {"broker": 1.5, "executor": 2.0}}],
        },
        "raw_kafka": {"levels": [{**lv, "cpu_ms_per_run": {"broker": 0.5}}]},
    }
    text = "\n".join(e2e_lines(result))
    assert "| agent | in flight | broker | executor | all |" in text
    assert "| step3 · processes | 16 | 1.50 | 2.00 | 3.50 |" in text
    assert "| raw_kafka | 16 | 0.50 |  | 0.50 |" in text


def test_cpu_meter_reads_this_process_and_skips_one_that_is_gone() -> None:
    import os

    from benchmarks.e2e_cpu import CpuMeter, cpu_seconds

    assert cpu_seconds(os.getpid()) is not None
    meter = CpuMeter({"me": os.getpid(), "gone": 2**22 + 12345})
    meter.start()
    sum(i * i for i in range(200_000))  # burn a little CPU
    per_run = meter.per_run(1)
    assert set(per_run) == {"me"} and per_run["me"] >= 0
