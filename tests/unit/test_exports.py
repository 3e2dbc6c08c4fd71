"""The front door: ``runplane.__all__`` is pinned, every name resolves, nothing leaks.

Like httpx's ``test_exported_members``: adding or removing a public name is a deliberate
change to this list, not a side effect of an import.
"""

from __future__ import annotations

import subprocess
import sys

import runplane
import runplane.core
import runplane.errors

EXPECTED = {
    # agents and the context
    "REGISTRY", "AgentRegistry", "AgentSpec", "agent", "StepCtx", "Decision", "CaseState",
    # effect declarations, durability, provider and tool interfaces
    "EffectDecl", "RetryPolicy", "Recovery", "Durability", "Generation", "ModelProvider", "Tool",
    # calendar rule helpers
    "minutes", "hours", "days", "working_days",
    # errors an agent may catch, and the ones registration raises
    "EffectError", "CaseConflict", "CaseRefused", "ApprovalExpired", "UnknownCapability", "LintFailed",
    # configuration and the error hierarchy
    "Settings", "RunplaneError", "ConfigError", "WireError", "SchemaError", "TerminalError",
    "NonDeterminismError", "ChainError", "CalendarError", "RetryableError",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(runplane.__all__) == EXPECTED
    assert len(runplane.__all__) == len(EXPECTED)  # no duplicates


def test_every_exported_name_resolves_to_the_same_object_as_its_home() -> None:
    from runplane.config import Settings

    homes = {
        **{n: getattr(runplane.errors, n) for n in dir(runplane.errors)},
        **vars(runplane.core),
        "Settings": Settings,
    }
    for name in runplane.__all__:
        assert getattr(runplane, name) is homes[name], name


def test_no_public_name_leaks_outside_all() -> None:
    public = {n for n in vars(runplane) if not n.startswith("_")}
    # Submodules appear as attributes once imported; they are packages, not exports.
    modules = {n for n in public if type(getattr(runplane, n)).__name__ == "module"}
    assert public - modules - {"annotations"} == set(runplane.__all__)


def test_an_agent_can_be_written_from_the_front_door_alone() -> None:
    registry = runplane.AgentRegistry()

    @registry.agent(
        "hello",
        durability=runplane.Durability.CHECKPOINTED,
        effects=[runplane.EffectDecl("greet", mutating=False)],
    )
    async def hello(ctx: runplane.StepCtx, input: dict[str, str]) -> str:
        return str(await ctx.tool("greet", {"name": input["name"]}))

    spec = registry.spec("hello")
    assert spec.durability is runplane.Durability.CHECKPOINTED
    assert spec.decl_for("greet") == runplane.EffectDecl("greet", mutating=False)


def test_importing_the_front_door_in_a_fresh_interpreter_works() -> None:
    # Catches import cycles between runplane/__init__ and the modules it re-exports.
    code = "import runplane.errors, runplane; print(len(runplane.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(EXPECTED)
