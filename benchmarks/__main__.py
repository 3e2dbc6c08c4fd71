"""``python -m benchmarks`` (``make bench``): every benchmark in one run → ``bench/``.

Starts the local stack unless it already answers, then runs, in this order and in this process:

- ``benchmarks.core``      replay cost per step for 10 / 1,000 / 100,000-call histories;
- ``benchmarks.executor``  steps/s and admission-to-completion p50/p99 on the real broker, and
                           the raw confluent-kafka transactional consume→produce baseline;
- ``benchmarks.admission`` admissions/s with 0 % and 50 % duplicates, produce→reply latency;
- ``benchmarks.e2e``       emit → COMPLETED through admission and the executor, a 3-step and a
                           no-op agent one at a time, 16 and 200 in flight (p50/p99, runs/s),
                           beside the same closed loops on a raw two-hop Kafka path, and where
                           a lone run's time goes, hop by hop;
- ``benchmarks.retention`` restore time of a partition with 10,000 ended and 1,000 live runs,
                           with the results retention against none.
- ``benchmarks.parked``    100,000 runs parked on approvals across two executor processes:
                           memory with eviction on, and restore after a SIGKILL
                           (``RUNPLANE_BENCH_PARKED_RUNS`` for another count).
- ``benchmarks.gate``      the sink gate's cost per outbound call beside the same agent
                           ungated (in memory), at 201 and 2,001 calls;
- ``benchmarks.replaytest`` replay testing of a recorded run beside the engine's own rebuild.
- ``benchmarks.fanout``    a fan-out of N slow tool calls inside one run vs the same N calls
                           one after another (wall time, ratio, calls seen in flight at once).
- ``benchmarks.announce``   what announce-before-act costs a lone generation (two commits)
                           beside a lone in-process read whose announce rides (one commit).
- ``benchmarks.loop``      the agent loop's overhead per turn and per tool call, beside bare
                           ``ctx.generate`` / ``ctx.tool`` calls (instant model and tool).
- ``benchmarks.stream``    live streams: a token from the fake model to an SSE client (p50/p99),
                           200 runs watched at once (events lost or duplicated per client), and
                           runs/s streamed vs not (ratio, same run).
- ``benchmarks.timers``    the timer turn among 100,000 parked runs: a scan of every snapshot
                           beside the timer index (ms per turn, ratio; in memory).
- ``benchmarks.txn``       one transaction shaped like admission's, phase by phase: back to
                           back with our ``retry.backoff.ms`` and with the old 5 ms, spaced out,
                           and by partitions written.

Writes ``bench/results.json`` (the raw numbers), ``bench/report.md`` (numbers, ratios to the
baseline, the machine) and ``bench/plot.png``. A benchmark that fails is reported as such with
its error; the others still run. Exit status 1 when any failed.

    python -m benchmarks [--only core,e2e] [--out bench]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import render_markdown, render_plot
from runplane.config import Settings

ORDER = (
    "core",
    "executor",
    "admission",
    "e2e",
    "gate",
    "parked",
    "replaytest",
    "retention",
    "fanout",
    "announce",
    "loop",
    "stream",
    "timers",
    "txn",
)
REPO_ROOT = Path(__file__).resolve().parents[1]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine(libs_dir: Path | None) -> dict[str, Any]:
    """CPU model, cores, memory, OS, Python, Kafka and client versions, commit."""
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in _read("/proc/cpuinfo").splitlines()
            if ln.startswith("model name")
        ),
        platform.processor() or platform.machine(),
    )
    mem_kib = next(
        (
            int(ln.split()[1])
            for ln in _read("/proc/meminfo").splitlines()
            if ln.startswith("MemTotal:")
        ),
        0,
    )
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    if libs_dir is not None:
        jars = sorted(p.name for p in libs_dir.glob("kafka_2.13-*.jar"))
        if jars:
            info["kafka"] = (
                jars[0].removeprefix("kafka_2.13-").removesuffix(".jar") + " (KRaft, single node)"
            )
    try:
        import confluent_kafka

        info["confluent_kafka"] = (
            f"{confluent_kafka.__version__} / {confluent_kafka.libversion()[0]}"
        )
    except ImportError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        if commit:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            # Uncommitted changes were measured too: say so rather than name a commit alone.
            info["commit"] = f"{commit} + uncommitted changes" if dirty else commit
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _runner(name: str, settings: Settings) -> Callable[[], Any]:
    module = importlib.import_module(f"benchmarks.{name}")
    fn = module.run
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {}
    if "baseline" in params:
        # One raw-Kafka baseline per report (the executor benchmark's): don't measure another.
        kwargs["baseline"] = False
    if "settings" in params:
        return lambda: fn(settings, **kwargs)
    return lambda: fn(**kwargs)


def run_all(
    settings: Settings, names: tuple[str, ...], log: Callable[[str], None]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        log(f"running {name} …")
        began = time.monotonic()
        try:
            result = _runner(name, settings)()
            out[name] = {
                "ok": True,
                "seconds": round(time.monotonic() - began, 1),
                "result": result,
            }
            log(f"{name}: done in {time.monotonic() - began:.1f}s")
        except Exception as exc:  # a failed benchmark is reported, the others still run
            traceback.print_exc()
            out[name] = {
                "ok": False,
                "seconds": round(time.monotonic() - began, 1),
                "error": f"{type(exc).__name__}: {exc}",
            }
            log(f"{name}: FAILED ({type(exc).__name__}: {exc})")
    return out


def _ensure_stack(log: Callable[[str], None]) -> tuple[Settings, Path | None]:
    from runplane.stack import StackError, ensure_up

    last = [0.0]

    def progress(message: str) -> None:  # a log, not a status line: at most one line a second
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            log(message)

    try:
        stack = ensure_up(Settings.from_env(), root=REPO_ROOT, progress=progress)
    except StackError as exc:
        log(f"error: the local stack is not available: {exc}")
        raise SystemExit(1) from None
    log("stack: " + ", ".join(f"{c.name} {c.state}" for c in stack.report.components))
    return stack.settings, stack.config.libs_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--only", default=",".join(ORDER), help=f"comma-separated subset of {', '.join(ORDER)}"
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench", help="output directory")
    args = parser.parse_args(argv)
    names = tuple(n.strip() for n in args.only.split(",") if n.strip())
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    def log(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    started = dt.datetime.now(dt.UTC)
    began = time.monotonic()
    settings, libs_dir = _ensure_stack(log) if names != ("core",) else (Settings.from_env(), None)
    benches = run_all(dataclasses.replace(settings), names, log)
    results = {
        "started": started.strftime("%Y-%m-%d %H:%M:%SZ"),
        "elapsed_s": round(time.monotonic() - began, 1),
        "machine": machine(libs_dir),
        "benchmarks": benches,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    report = render_markdown(results)
    (args.out / "report.md").write_text(report)
    render_plot(results, args.out / "plot.png")
    print(report)
    log(f"wrote {args.out / 'report.md'}, {args.out / 'plot.png'} and {args.out / 'results.json'}")
    return 0 if all(b["ok"] for b in benches.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
