"""Property tests over random agents and random crash points.

A random agent is a program of effect calls whose requests depend on everything before them
(an accumulator threads through), so any divergence shows up in a witness. Each program is
run once uninterrupted and once with crashes injected before and after live calls and while
parked on a human; the recorded history must come out the same, every mutation performed
exactly once, the chain intact. Changing the request at any position must be refused with a
positioned diagnostic, never answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Recovery,
    StepCtx,
    replay_history,
)
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, ResultEntry, RunStatus

Program = list[tuple[str, int]]

OPS = ("read", "write", "gen", "rand", "observe", "approve", "checkpoint", "case")
programs = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3)), min_size=1, max_size=10)
# One call_seq per op (``case`` takes two), so a program position is a call_seq.
single_call_programs = st.lists(
    st.tuples(st.sampled_from([op for op in OPS if op != "case"]), st.integers(0, 3)),
    min_size=1,
    max_size=10,
)


def _seven_times(n: int) -> Callable[[], int]:
    return lambda: n * 7


# Programs that read a model before they write: the gate would refuse the writes (what it
# cannot attribute carries what the run has read), so the stand-ins are declared sinks whose
# fields carry no authority — the property is about replay, not labels.
OPEN_SINKS = (SinkDecl("tool://write", protected=(FieldRule("$.x", trusted=False),)),)


def make_agent(program: Program) -> Callable[[StepCtx, dict[str, Any]], Any]:
    async def agent(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        acc = int(input["salt"])
        for i, (op, n) in enumerate(program):
            if op == "read":
                acc = int((await ctx.tool("read", {"x": acc, "n": n}))["y"])
            elif op == "write":
                reply = await ctx.tool(
                    "write", {"x": acc, "n": n}, idempotency_key=f"{ctx.run_id}/{i}"
                )
                acc = int(reply["y"])
            elif op == "gen":
                generation = await ctx.generate("scripted", "m", f"p{acc}:{n}")
                acc = (acc + len(generation.text)) % 1000
            elif op == "rand":
                acc = (acc + ctx.randint(0, 100)) % 1000
            elif op == "observe":
                acc = (acc + int(await ctx.observe(f"o{n}", _seven_times(n)))) % 1000
            elif op == "approve":
                decision = await ctx.approval(f"step {i}?", {"acc": acc, "n": n}, role="reviewer")
                acc += 1 if decision.approved else 2
            elif op == "checkpoint":
                await ctx.checkpoint({"acc": acc, "i": i, "n": n})
            elif op == "case":  # a versioned read-modify-write of the run's case
                current = await ctx.case_state()
                state = {**(current.state or {}), f"k{i}": acc + n}
                acc = (acc + int(await ctx.put_case_state(current.version, state))) % 1000
        return {"acc": acc}

    return agent


class World:
    """Tools with observable side effects: ``write`` applies once per idempotency key."""

    def __init__(self) -> None:
        self.applied: dict[str, dict[str, int]] = {}
        self.invocations: Counter[str] = Counter()

    def tools(self) -> dict[str, Any]:
        return {"read": self.read, "write": self.write, "write_probe": self.probe}

    def read(self, args: dict[str, Any], key: str | None) -> dict[str, int]:
        self.invocations["read"] += 1
        return {"y": (int(args["x"]) * 31 + int(args["n"])) % 1000}

    def write(self, args: dict[str, Any], key: str | None) -> dict[str, int]:
        assert key is not None
        self.invocations[f"write:{key}"] += 1
        return self.applied.setdefault(
            key, {"y": (int(args["x"]) * 17 + int(args["n"]) + 1) % 1000}
        )

    def probe(self, args: dict[str, Any], key: str | None) -> dict[str, int] | None:
        return self.applied.get(key or "")


EFFECTS = [
    EffectDecl("read", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("write", mutating=True, recovery=Recovery.RECONCILE, probe="write_probe"),
]


def spec_for(program: Program, durability: Durability = Durability.REPLAYABLE) -> AgentSpec:
    registry = AgentRegistry()
    registry.register(
        AgentSpec(
            "prog",
            sinks(*OPEN_SINKS)(make_agent(program)),
            durability,
            None,
            {d.name: d for d in EFFECTS},
        ),
        lint=False,
    )
    return registry.spec("prog")


def provider() -> ScriptedProvider:
    return ScriptedProvider(lambda model, prompt, params: f"answer to {prompt}")


def execute(
    spec: AgentSpec,
    salt: int,
    crash_points: frozenset[tuple[int, str]] = frozenset(),
    park_crashes: int = 0,
) -> tuple[Driver, World, str]:
    world = World()
    acts = {"n": 0}
    pending = set(crash_points)

    def hook(phase: str, call: Any) -> bool:
        if phase == "before_act":
            acts["n"] += 1
        point = (acts["n"], phase)
        if point in pending:
            pending.discard(point)
            return True
        return False

    driver = Driver(
        spec,
        tools=world.tools(),
        providers={"scripted": provider()},
        crash_hook=hook,
        cases={"case-p": {}},
    )
    run = driver.run("prog", {"salt": salt}, session_id="run-p", case_id="case-p")
    crashes_left = park_crashes
    while run.status is RunStatus.AWAITING_HUMAN:
        if crashes_left:
            crashes_left -= 1
            driver.crash(run.session_id)  # evicted / restarted while waiting for a human
        run = driver.decide(run.session_id, "APPROVED")
    return driver, world, run.session_id


def projection(
    results: dict[tuple[int, int], ResultEntry],
) -> dict[tuple[int, int], tuple[Any, ...]]:
    return {
        k: (e.family, e.name, e.request_witness, e.ok, e.value_json) for k, e in results.items()
    }


crash_plans = st.frozensets(
    st.tuples(st.integers(1, 12), st.sampled_from(["before_act", "after_act"])), max_size=4
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=programs, salt=st.integers(0, 999), crashes=crash_plans, park_crashes=st.integers(0, 2)
)
def test_crashing_anywhere_gives_the_same_history_and_applies_each_mutation_once(
    program: Program, salt: int, crashes: frozenset[tuple[int, str]], park_crashes: int
) -> None:
    spec = spec_for(program)
    clean, clean_world, sid = execute(spec, salt)
    crashed, world, _ = execute(spec, salt, crashes, park_crashes)
    clean_run, run = clean.view(sid), crashed.view(sid)

    assert clean_run.status is RunStatus.COMPLETED and run.status is RunStatus.COMPLETED
    assert run.output == clean_run.output
    assert projection(dict(run.results)) == projection(dict(clean_run.results))
    # Every mutation exactly once, in the world and in the journal.
    writes = [i for i, (op, _) in enumerate(program) if op == "write"]
    assert world.applied.keys() == clean_world.applied.keys() and len(world.applied) == len(writes)
    assert all(count == 1 for key, count in world.invocations.items() if key.startswith("write:"))
    recorded = Counter(
        (r.era, r.call_seq)
        for r in run.journal
        if r.kind is not JournalKind.RUN_ADMITTED and r.body_digest is not None
    )
    assert all(count == 1 for count in recorded.values()) and len(recorded) == len(run.results)
    assert crashed.verify(sid).ok, crashed.verify(sid)
    # And the completed history replays with zero live calls.
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=programs, salt=st.integers(0, 999), crashes=crash_plans, park_crashes=st.integers(0, 2)
)
def test_checkpointed_runs_restart_in_new_eras_without_repeating_mutations(
    program: Program, salt: int, crashes: frozenset[tuple[int, str]], park_crashes: int
) -> None:
    spec = spec_for(program, Durability.CHECKPOINTED)
    clean, clean_world, sid = execute(spec, salt)
    crashed, world, _ = execute(spec, salt, crashes, park_crashes)
    assert crashed.view(sid).status is RunStatus.COMPLETED
    assert crashed.view(sid).output == clean.view(sid).output
    assert world.applied == clean_world.applied
    assert all(count == 1 for key, count in world.invocations.items() if key.startswith("write:"))
    assert crashed.verify(sid).ok
    # A person is asked once per approval, however often the run restarted while waiting.
    assert (
        len(crashed.tasks_opened)
        == len(clean.tasks_opened)
        == sum(op == "approve" for op, _ in program)
    )
    assert crashed.cases == clean.cases  # every case write applied once


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=single_call_programs, salt=st.integers(0, 999), data=st.data())
def test_a_changed_request_at_any_position_is_refused_never_answered(
    program: Program, salt: int, data: st.DataObject
) -> None:
    changeable = [i for i, (op, _) in enumerate(program) if op != "rand"]
    if not changeable:
        program = [*program, ("read", 0)]
        changeable = [len(program) - 1]
    driver, world, sid = execute(spec_for(program), salt)
    run = driver.view(sid)
    position = data.draw(st.sampled_from(changeable))
    op, n = program[position]
    changed = list(program)
    changed[position] = (op, (n + 1) % 4)
    before = Counter(world.invocations)

    report = replay_history(spec_for(changed), run.snapshot, dict(run.results))

    assert report.status is RunStatus.QUARANTINED
    assert report.divergence is not None and f"call_seq {position}:" in report.divergence
    assert report.live_calls == 0 and report.output is None
    assert world.invocations == before  # nothing was performed for the changed call
