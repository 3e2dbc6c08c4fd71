"""A family is one row (issue 25 item 2): the registry's rows are each family's whole contract,
every op / event type / park has one owner, and family modules import only the kernel.

The engine's modules fall in three layers: the **kernel** (what every family builds on),
the **family modules** (each belongs to one registry row), and what sits **above** the
registry (the driver, the runtime, applying a step, stranded runs, the front door). Family
modules import only the kernel or modules of their own family — never another family, never
the registry; kernel modules import neither. Every import counts, function-local ones too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from runplane.core.effect import Op
from runplane.core.engine import registry, table
from runplane.core.engine.registry import FAMILIES, INBOX, Family, _inbox, _one_owner
from runplane.wire import CaseReply, ParkKind, Signal, TaskDecision, Wake

ENGINE = Path(registry.__file__).parent
PREFIX = "runplane.core.engine"

KERNEL = frozenset(
    {
        "asking",
        "bounds",
        "cancel",
        "decode",
        "ends",
        "eras",
        "operated",
        "patches",
        "planlabels",
        "recorder",
        "replay",
        "sinkgate",
        "state",
        "step",
        "table",
        "tasks",
        "timeouts",
        "tools",
        "values",
        "vocab",
    }
)
# Family module → the registry row it belongs to.
FAMILY_OF = {
    "approvals": "approval",
    "cases": "case",
    "closing": "case",
    "commission": "fanout",
    "doubt": "live",
    "fanout": "fanout",
    "local": "local",
    "panels": "panel",
    "release": "release",
    "signals": "signal",
    "successor": "successor",
    "timers": "timer",
    "updates": "signal",
}
ABOVE = frozenset({"__init__", "apply", "driver", "registry", "replaytest", "runtime", "stranded"})


def engine_imports(source: str) -> set[str]:
    """Every engine module ``source`` imports, at any depth (function-local ones included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX + "."):
                    found.add(alias.name.removeprefix(PREFIX + ".").split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PREFIX:
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(PREFIX + "."):
                found.add(node.module.removeprefix(PREFIX + ".").split(".")[0])
    return found


def violations(module: str, source: str) -> list[str]:
    """What ``module`` (a kernel or family module) imports that its layer forbids."""
    bad = []
    for imported in sorted(engine_imports(source) - {module}):
        if imported in KERNEL:
            continue
        same_family = module in FAMILY_OF and FAMILY_OF.get(imported) == FAMILY_OF[module]
        if not same_family:
            bad.append(f"{module} imports {imported}")
    return bad


def _modules() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(ENGINE.glob("*.py"))}


def test_every_engine_module_has_a_layer() -> None:
    layers = (KERNEL, frozenset(FAMILY_OF), ABOVE)
    for name in _modules():
        assert sum(name in layer for layer in layers) == 1, f"engine/{name}.py: kernel or family?"
    assert set(FAMILY_OF.values()) <= {f.name for f in FAMILIES}


def test_family_modules_import_only_the_kernel_and_kernel_modules_no_family() -> None:
    found = [
        v
        for name, source in _modules().items()
        if name in KERNEL or name in FAMILY_OF
        for v in violations(name, source)
    ]
    assert found == []


def test_the_import_check_catches_a_family_importing_another(tmp_path: Path) -> None:
    """A planted family module: a load-time import of the kernel is fine; a function-local
    import of another family, ``from engine import <family>``, and the registry are not."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from runplane.core.engine.state import Run\n"
        "from runplane.core.engine import decode, timers\n"
        "def handler(run):\n"
        "    from runplane.core.engine.approvals import approval  # dodging a cycle\n"
        "    import runplane.core.engine.registry\n"
        "    return approval\n"
    )
    FAMILY_OF["planted"] = "planted"
    try:
        found = violations("planted", planted.read_text())
    finally:
        del FAMILY_OF["planted"]
    assert found == [
        "planted imports approvals",
        "planted imports registry",
        "planted imports timers",
    ]
    # Within one family (a commission is a fan-out of one) an import is the family's own.
    assert violations("commission", "from runplane.core.engine import fanout\n") == []
    assert violations("state", "from runplane.core.engine import panels\n") == [
        "state imports panels"
    ]


# The timer itself: the Wake that delivers it, its instant, its wait and its park.
TIMER_WORDS = re.compile(r"\bWake\b|wake_at|WaitKind\.TIMER|ParkKind\.WAKE")


def timer_knowledge(module: str, source: str) -> list[str]:
    """What of the timer a family module outside the timer row names: the kernel module that
    keeps it (``timeouts``) or the timer itself. Another family bounds a wait through ``Run``
    (``timeout_at``, ``bound_by``, ``time_out``) and knows no more."""
    if FAMILY_OF.get(module) == "timer":
        return []
    found = sorted({m.group() for m in TIMER_WORDS.finditer(source)})
    return (["imports timeouts"] if "timeouts" in engine_imports(source) else []) + found


def test_only_the_timers_family_knows_the_timer() -> None:
    found = {name: timer_knowledge(name, source) for name, source in _modules().items()}
    assert {name: f for name, f in found.items() if name in FAMILY_OF and f} == {}
    # A family arming the timer itself is caught, the timers family is not.
    planted = "from runplane.core.engine import timeouts\nrun.wake_at = due  # a Wake\n"
    assert timer_knowledge("signals", planted) == ["imports timeouts", "Wake", "wake_at"]
    assert timer_knowledge("timers", planted) == []


# -- the rows ----------------------------------------------------------------------------------


def test_every_op_and_every_event_type_has_exactly_one_owner() -> None:
    owned = [op for f in FAMILIES for op in f.ops]
    assert sorted(owned) == sorted(set(owned))
    assert {op for op in Op} - set(owned) == set()  # every op is served by some row
    events = [t for f in FAMILIES for t in f.events]
    assert sorted(map(str, events)) == sorted(map(str, {Signal, TaskDecision, CaseReply, Wake}))
    parks = [k for f in FAMILIES for k in f.rewait]
    assert sorted(parks) == sorted(set(parks))


def test_two_owners_are_refused_at_import() -> None:
    with pytest.raises(AssertionError, match="two owners: a and b"):
        _one_owner("event type", [("a", Signal), ("b", Signal)])
    claimed = Family("c", {}, claims={Wake: registry.Claim(lambda r, e: True, INBOX[Wake])})
    with pytest.raises(AssertionError, match="nobody owns"):
        _inbox((claimed,))


def test_the_kernel_table_is_the_rows() -> None:
    assert {op: d for f in FAMILIES for op, d in f.decode.items()} == table.DECODE
    assert table.REWAIT[ParkKind.WAKE] is not None and ParkKind.OPERATOR not in table.REWAIT
    assert {
        "tool", "approval", "case", "deadline", "signal", "update", "answer", "timer", "release"
    } == table.CROSS_ERA  # fmt: skip
    assert table.CROSS_ERA | {"commission"} == table.LOGGED
    assert {str(w) for w in table.INTERRUPTIBLE} == {"signal", "approval", "timer"}
    # The waits a timeout of their own bounds: named by their rows, not by the timer row.
    assert {str(w) for w in table.BOUNDED} == {"signal", "approval"}
    assert {p.name for f in FAMILIES for p in f.parts} == set(table.PARTS)
    assert {"timer", "signal_ids", "cancel"} <= set(table.PARTS)
    with pytest.raises(RuntimeError):
        table.install(
            decode={},
            rewait={},
            cross_era=set(),
            logged=set(),
            interruptible=set(),
            bounded=set(),
            parts={},
        )
