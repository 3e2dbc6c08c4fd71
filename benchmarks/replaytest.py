"""Replay testing's cost (no I/O): ``replay_recording`` on a recorded run, beside the engine's
own rebuild of the same run measured in the same process (the baseline).

    python -m benchmarks.replaytest      # prints the numbers as JSON

For N tool calls (a run parked at the end, as a run in flight is): ``Runtime.restore`` (what
the executor does to bring a run back; the baseline), ``replay_history`` (the engine's
verify-only replay), ``Recording.problems`` (chain + input + attached requests verified) and
``replay_recording`` (both, plus the divergence bookkeeping) — best of a few repeats, and the
ratios to the baseline. The gate replays a sample of runs in flight; this says what a run of
N calls costs it beyond reading the run from Kafka.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any

from benchmarks.core import _spec
from runplane.core import Runtime, replay_history
from runplane.core.engine import replay_recording
from runplane.core.recording import Recording
from runplane.testing import Driver

SIZES = (10, 1_000, 10_000)


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _recording(n: int) -> tuple[Any, Recording]:
    spec = _spec(n)
    driver = Driver(spec, tools={"add": lambda args, key: args["i"] % 7})
    run = driver.run("bench", {}, session_id="bench-1")
    return spec, Recording(run.snapshot, run.journal, run.results)


def _measure(n: int) -> dict[str, float]:
    spec, rec = _recording(n)
    repeats = 5 if n <= 1_000 else 2
    report = replay_recording(spec, rec)
    assert report.ok and report.replayed == n, report
    base = _best(lambda: Runtime.restore(spec, rec.snapshot, rec.results, now_ms=10**13), repeats)
    history = _best(lambda: replay_history(spec, rec.snapshot, rec.results), repeats)
    verify = _best(rec.problems, repeats)
    full = _best(lambda: replay_recording(spec, rec), repeats)
    return {
        f"n{n}_restore_ms": base * 1e3,
        f"n{n}_replay_history_ms": history * 1e3,
        f"n{n}_verify_ms": verify * 1e3,
        f"n{n}_replay_recording_ms": full * 1e3,
        f"n{n}_ratio_replay_recording_to_restore": full / base,
    }


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sizes:
        out.update(_measure(n))
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
