"""Labels: the join is a semilattice, and each effect labels its result at the source."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, AgentSpec, Outcome, Runtime, StepCtx, run_admitted
from runplane.core.labels import BOTTOM, at_source, join, join_all
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import Label, Sensitivity, StartRun, Trust

labels = st.builds(
    Label,
    trust=st.sampled_from(list(Trust)),
    sensitivity=st.sampled_from(list(Sensitivity)),
    provenance=st.lists(
        st.sampled_from(["tool://a", "tool://b", "model:p/m", "agent/x"]), unique=True
    ).map(lambda p: tuple(sorted(p))),
)


def test_join_takes_the_worse_trust_the_higher_sensitivity_and_both_origins() -> None:
    a = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.SECRET, provenance=("tool://vault",))
    b = Label(
        trust=Trust.UNTRUSTED, sensitivity=Sensitivity.PUBLIC, provenance=("model:openai/gpt-4o",)
    )
    assert join(a, b) == Label(
        trust=Trust.UNTRUSTED,
        sensitivity=Sensitivity.SECRET,
        provenance=("model:openai/gpt-4o", "tool://vault"),
    )


@given(labels, labels, labels)
def test_join_is_associative_commutative_and_idempotent(a: Label, b: Label, c: Label) -> None:
    assert join(join(a, b), c) == join(a, join(b, c))
    assert join(a, b) == join(b, a)
    assert join(a, a) == a
    assert join(a, BOTTOM) == a == join_all([a])


@given(labels, labels)
def test_join_never_lowers_either_side(a: Label, b: Label) -> None:
    j = join(a, b)
    assert join(j, a) == j and join(j, b) == j  # j is above both
    assert set(a.provenance) | set(b.provenance) == set(j.provenance)


def _spec(fn: Any) -> AgentSpec:
    return AgentRegistry().register(AgentSpec("t", fn), lint=False)


def test_each_effect_labels_its_result_at_the_source() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("lookup", {"q": 1}, mutating=False)
        await ctx.generate("scripted", "m1", "hello")
        return await ctx.wait_signal("go")

    driver = Driver(
        _spec(agent),
        tools={"lookup": lambda a, k: {"hit": True}},
        providers={"scripted": ScriptedProvider()},
    )
    run = driver.run("t", {})
    run = driver.signal(run.session_id, "go", "payload")
    tool, gen, signal = (run.results[(0, i)].label for i in range(3))
    assert tool == Label(
        trust=Trust.TRUSTED,
        sensitivity=Sensitivity.INTERNAL,
        provenance=("agent/t", "tool://lookup"),
    )
    assert (
        gen is not None
        and gen.trust is Trust.UNTRUSTED
        and gen.provenance == ("agent/t", "model:scripted/m1")
    )
    assert signal is not None and signal.trust is Trust.UNTRUSTED
    # The chain record carries the same label as the body.
    by_seq = {r.call_seq: r.label for r in run.journal if r.body_digest is not None}
    assert by_seq[0] == tool and by_seq[1] == gen


def test_a_label_the_performer_supplies_is_joined_with_the_source_label_not_replacing_it() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.tool("vault", {}, mutating=False)

    admitted = run_admitted(
        "s", capability="t", admission_key="k", tenant="x", initiator="i", input_json="{}", now_ms=1
    )
    start = StartRun(
        session_id="s",
        capability="t",
        input_json="{}",
        admission_key="k",
        tenant="x",
        initiator="i",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    rt, step = Runtime.start(_spec(agent), start, now_ms=2)
    supplied = Label(
        trust=Trust.TRUSTED, sensitivity=Sensitivity.SECRET, provenance=("https://vault.example",)
    )
    done = rt.complete(
        step.live_calls[0].call_seq, Outcome.success("s3cr3t", label=supplied), now_ms=3
    )
    (entry,) = done.results
    assert entry.label == join(at_source("tool", "tool://vault", "t"), supplied)
    assert (
        entry.label is not None
        and entry.label.sensitivity is Sensitivity.SECRET
        and "tool://vault" in entry.label.provenance
    )


@given(labels, labels)
def test_flows_to_is_the_order_of_the_join(a: Label, b: Label) -> None:
    from runplane.core.labels import flows_to

    assert flows_to(a, join(a, b)) and flows_to(b, join(a, b))
    assert flows_to(a, b) == (join(a, b) == b)
    assert flows_to(BOTTOM, a)


@given(labels, labels, st.integers(), st.integers())
def test_labeled_values_keep_their_label_through_map_and_combine(
    a: Label, b: Label, x: int, y: int
) -> None:
    from runplane.core.labels import Labeled

    left, right = Labeled(x, a), Labeled(y, b)
    assert left.map(lambda v: v + 1) == Labeled(x + 1, a)
    both = left.combine(right, lambda u, v: u * v)
    assert both.value == x * y and both.label == join(a, b)
