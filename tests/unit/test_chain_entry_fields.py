"""The verifier holds a result entry to every field its chain record commits to (review minor 3).

Replay trusts more of a ResultEntry than its body: its stamp becomes ``ctx.now()``, its
witness is what a re-issued call is compared with. Before, only (ok, value, error) were
checked, so an entry with a moved stamp verified and replayed a different clock.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, Durability, EffectDecl, StepCtx, verify_chain
from runplane.core.chain import ChainFault, default_label
from runplane.testing import Driver
from runplane.wire import ResultEntry


def _run() -> tuple[Any, dict[tuple[int, int], ResultEntry]]:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.tool("echo", {"n": 1})

    spec = AgentRegistry().register(
        AgentSpec(
            "t", agent, Durability.REPLAYABLE, None, {"echo": EffectDecl("echo", mutating=False)}
        ),
        lint=False,
    )
    run = Driver(spec, tools={"echo": lambda args, key: args["n"]}).run("t", {})
    return run, dict(run.results)


def test_an_untouched_run_verifies() -> None:
    run, results = _run()
    assert verify_chain(run.journal, results).ok


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stamp_ms", lambda e: e.stamp_ms + 1),
        ("request_witness", lambda e: "0" * 64),
        ("name", lambda e: "tool://other"),
        ("family", lambda e: "generation"),
        ("label", lambda e: default_label(["somewhere/else"])),
    ],
)
def test_an_entry_that_differs_from_its_record_is_caught(field: str, value: Any) -> None:
    run, results = _run()
    ((key, entry),) = [(k, e) for k, e in results.items() if e.family == "tool"]
    tampered = {**results, key: dataclasses.replace(entry, **{field: value(entry)})}
    verdict = verify_chain(run.journal, tampered)
    assert not verdict.ok and verdict.fault is ChainFault.BODY_DIGEST_MISMATCH
    assert field in verdict.detail
    recorded = next(r for r in run.journal if r.call_seq == key[1] and r.body_digest is not None)
    assert verdict.bad_seq == recorded.seq
