"""Micro-benchmarks of the executor's per-step CPU cost, without Kafka.

    python -m benchmarks.hotpath         # prints a table; run() returns the numbers

Each row is the best of several timed repeats of one operation on the executor's hot path:
sealing a journal record, canonical JSON of a typical request and record body, ``to_dict``,
constructing a wire record (validation included), Avro single-object encode and decode, and
one live effect step of the core (``Runtime.complete``) plus a whole 5-step run (start, five
completions) — the unit ``benchmarks.executor`` measures end to end. Numbers only: nothing
here asserts a timing.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any

from runplane.core import (
    AgentRegistry,
    EffectDecl,
    Outcome,
    Recovery,
    Runtime,
    StepCtx,
)
from runplane.core.canonical import canonical_bytes, canonical_json
from runplane.core.chain import Draft, default_label, record_hash, run_start, seal
from runplane.wire import JournalKind, JournalRecord, ResultEntry, StartRun, decode, encode, to_dict

STEPS = 5
_REGISTRY = AgentRegistry()


@_REGISTRY.agent(
    "hot5", effects=[EffectDecl("instant", mutating=False, recovery=Recovery.RETRY, timeout_s=5.0)]
)
async def _hot5(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    total = 0
    for i in range(STEPS):
        got = await ctx.tool("instant", {"i": i, "n": input["n"]})
        total += int(got["i"])
    return {"total": total}


def _start_run(session_id: str) -> StartRun:
    _, start = run_start(
        session_id,
        capability="hot5",
        admission_key=f"k-{session_id}",
        tenant="t",
        initiator="i",
        input_json='{"n":1}',
        now_ms=1,
    )
    return start


def _whole_run(start: StartRun) -> int:
    runtime, step = Runtime.start(_REGISTRY["hot5"], start, now_ms=2)
    now = 3
    records = len(step.records)
    while step.live_calls:
        call = step.live_calls[0]
        step = runtime.complete(call.call_seq, Outcome.success(call.request["args"]), now_ms=now)
        records += len(step.records)
        now += 1
    return records


def _sample_record() -> JournalRecord:
    draft = Draft(
        session_id="r-0123456789abcdef0123456789abcdef",
        seq=7,
        era=0,
        kind=JournalKind.EFFECT_RECORDED,
        stamp_ms=1_700_000_000_000,
        call_seq=3,
        family="tool",
        name="tool://billing/charge",
        request_witness="ab" * 32,
        body_digest="cd" * 32,
        label=default_label(["agent/hot5", "tool://billing/charge"]),
    )
    return seal(draft, "ef" * 32)


def _sample_entry() -> ResultEntry:
    return ResultEntry(
        session_id="r-0123456789abcdef0123456789abcdef",
        era=0,
        call_seq=3,
        family="tool",
        name="tool://billing/charge",
        request_witness="ab" * 32,
        ok=True,
        value_json='{"i":3,"n":17}',
        error=None,
        stamp_ms=1_700_000_000_000,
        attempts=1,
        body_digest="cd" * 32,
        label=default_label(["agent/hot5"]),
    )


def _best_us(fn: Callable[[], object], number: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e6


def run(scale: float = 1.0) -> dict[str, float]:
    """Measure every row; ``scale`` multiplies the iteration counts. Returns µs per op."""
    record = _sample_record()
    entry = _sample_entry()
    draft = Draft(
        session_id=record.session_id,
        seq=record.seq,
        era=record.era,
        kind=record.kind,
        stamp_ms=record.stamp_ms,
        call_seq=record.call_seq,
        family=record.family,
        name=record.name,
        request_witness=record.request_witness,
        body_digest=record.body_digest,
        label=record.label,
    )
    request = {
        "args": {"i": 3, "n": 17},
        "tool": "instant",
        "note": "naïve — ünïcode",
        "amount": 12.5,
    }
    body = to_dict(record)
    encoded = encode(record)
    entry_bytes = encode(entry)
    starts = iter([_start_run(f"r-{i:032x}") for i in range(int(2_000 * scale) * 6)])
    fields = {
        name: getattr(record, name)
        for name in (
            "session_id",
            "seq",
            "era",
            "kind",
            "call_seq",
            "family",
            "name",
            "request_witness",
            "body_digest",
            "stamp_ms",
            "label",
            "cost",
            "attrs",
            "prev_hash",
            "hash",
        )
    }

    def n(k: int) -> int:
        return max(1, int(k * scale))

    rows = {
        "canonical_json(request)": _best_us(lambda: canonical_json(request), n(20_000)),
        "canonical_bytes(record dict)": _best_us(lambda: canonical_bytes(body), n(10_000)),
        "to_dict(JournalRecord)": _best_us(lambda: to_dict(record), n(10_000)),
        "JournalRecord(**fields)": _best_us(lambda: JournalRecord(**fields), n(10_000)),
        "record_hash(JournalRecord)": _best_us(lambda: record_hash(record), n(10_000)),
        "seal(draft)": _best_us(lambda: seal(draft, "ef" * 32), n(5_000)),
        "encode(JournalRecord)": _best_us(lambda: encode(record), n(10_000)),
        "encode(ResultEntry)": _best_us(lambda: encode(entry), n(10_000)),
        "decode(JournalRecord)": _best_us(lambda: decode(encoded), n(10_000)),
        "decode(ResultEntry)": _best_us(lambda: decode(entry_bytes), n(10_000)),
        f"whole {STEPS}-step run (start + {STEPS} complete)": _best_us(
            lambda: _whole_run(next(starts)), n(2_000)
        ),
    }
    rows["per effect step (whole run / steps)"] = (
        rows[f"whole {STEPS}-step run (start + {STEPS} complete)"] / STEPS
    )
    return rows


def main() -> None:
    rows = run()
    width = max(map(len, rows))
    print(f"{'operation':<{width}}  {'µs/op':>9}")
    for name, us in rows.items():
        print(f"{name:<{width}}  {us:>9.1f}")
    print(json.dumps({k: round(v, 2) for k, v in rows.items()}))


if __name__ == "__main__":
    main()
