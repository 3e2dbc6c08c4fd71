"""docs/reference/audit-attrs.md is true: every JournalKind has a section, and every attrs key
the platform writes is listed under its kind.

The keys are not listed here: they are observed. Runs of many shapes go through the test
Driver (the engine, the executor's commit discipline), the golden journals are read, and the
record builders outside the engine (admission's seq 0, repair, version parking, the cases
service's sweep runs, the executor's failure paths) are called — and each (kind, key) seen
must be in the page. A key added to the engine without a line in the page fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_cases_handler import CASE, DUE, registered

from runplane.core import AgentRegistry, AgentSpec, Durability, EffectDecl, Recovery, StepCtx
from runplane.core import repair as core_repair
from runplane.core.chain import run_start
from runplane.core.engine import fail_from_snapshot, fail_unstartable
from runplane.core.engine.stranded import park_stranded, release_stranded
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.core.keys import breach_request_id, sweep_run_id, warn_request_id
from runplane.core.policy import parse_policy
from runplane.core.releases import SinkRefused
from runplane.errors import TerminalError
from runplane.testing import Driver, FakeClock
from runplane.wire import (
    BreachDeadline,
    JournalKind,
    JournalRecord,
    RunStatus,
    WarnDeadline,
    from_dict,
)
from services.cases.handler import emits_for

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "audit-attrs.md"
ANY = "Any kind"

_HEADING = re.compile(r"^## (.+?)\s*$")
_ROW = re.compile(r"^\| `([^`]+)` \|")


def documented(text: str) -> dict[str, set[str]]:
    """Section title → the keys its table lists (the first column of each row)."""
    sections: dict[str, set[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1)
            sections[current] = set()
            continue
        row = _ROW.match(line)
        if row and current is not None:
            sections[current].add(row.group(1))
    return sections


def undocumented(
    records: Iterable[JournalRecord], sections: dict[str, set[str]]
) -> set[tuple[str, str]]:
    """The (kind, key) pairs of ``records`` the page does not list."""
    anywhere = sections.get(ANY, set())
    return {
        (str(r.kind), key)
        for r in records
        for key in r.attrs
        if key not in sections.get(str(r.kind), set()) | anywhere
    }


SECTIONS = documented(DOC.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------ the page
def test_every_written_kind_has_a_section_and_no_section_names_another() -> None:
    kinds = {str(k) for k in JournalKind if k is not JournalKind.OTHER}
    assert kinds - set(SECTIONS) == set(), "JournalKinds without a section"
    assert set(SECTIONS) - kinds - {ANY} == set(), "sections naming no JournalKind"
    assert "OTHER" not in SECTIONS  # never written: nothing to document


def test_the_checker_fails_on_a_key_the_page_does_not_list() -> None:
    admitted, _ = run_start(
        "s-x",
        capability="t",
        admission_key="k",
        tenant="default",
        initiator="ada",
        input_json="{}",
        now_ms=1,
        attrs={"not_a_documented_key": "1"},
    )
    assert undocumented([admitted], SECTIONS) == {("RUN_ADMITTED", "not_a_documented_key")}
    assert undocumented([replace(admitted, attrs={"tenant": "x"})], SECTIONS) == set()


# ------------------------------------------------------------------------------ the runs
def _registry(*specs: AgentSpec) -> AgentRegistry:
    registry = AgentRegistry()
    for spec in specs:
        registry.register(spec, lint=False)
    return registry


def _spec(
    capability: str,
    fn: Any,
    effects: tuple[EffectDecl, ...] = (),
    durability: Durability = Durability.REPLAYABLE,
) -> AgentSpec:
    return AgentSpec(capability, fn, durability, None, {e.name: e for e in effects})


async def _signals(ctx: StepCtx, input: Any) -> Any:
    first = await ctx.wait_signal("go")
    await ctx.sleep(60)
    second = await ctx.wait_signal("go")
    try:
        await ctx.wait_signal("late", timeout=1)
    except Exception as exc:
        return [first, second, type(exc).__name__]
    return [first, second]


async def _waits_forever(ctx: StepCtx, input: Any) -> Any:
    return await ctx.wait_signal("never")


async def _fails(ctx: StepCtx, input: Any) -> Any:
    return await ctx.tool("broken", {"x": 1})


async def _approval(ctx: StepCtx, input: Any) -> Any:
    decision = await ctx.approval("Ship?", {"n": 1}, role="ops", escalate_to="leads", timeout=600)
    return decision.approved


async def _panel(ctx: StepCtx, input: Any) -> Any:
    outcome = await ctx.human_panel("Send?", {"n": 1}, seats=["a", "b", "c"], approve_at=2)
    return str(outcome)


async def _continues(ctx: StepCtx, input: Any) -> Any:
    if input.get("n", 0) >= 1:
        return "done"
    return await ctx.continue_as_new({"n": 1})


async def _charge(ctx: StepCtx, input: Any) -> Any:
    return await ctx.tool("charge", {"amount": 7}, idempotency_key="charge-1")


async def _checkpointed(ctx: StepCtx, input: Any) -> Any:
    await ctx.checkpoint({"at": 1})
    return await ctx.tool("charge", {"amount": 7}, idempotency_key="charge-1")


async def _original(ctx: StepCtx, input: Any) -> Any:
    await ctx.observe("x", lambda: 1)
    return await ctx.wait_signal("go")


async def _changed(ctx: StepCtx, input: Any) -> Any:
    return await ctx.wait_signal("go")  # history has a clock read first: non-determinism


_redeployed = _spec("redeployed", _changed)


async def _child(ctx: StepCtx, input: Any) -> Any:
    if input.get("wait"):
        await ctx.wait_signal("never")
    return {"ok": input}


async def _parent(ctx: StepCtx, input: Any) -> Any:
    return await ctx.commission("child", {"wait": input.get("wait", False)})


async def _case_work(ctx: StepCtx, input: Any) -> Any:
    state = await ctx.case_state()
    await ctx.put_case_state(state.version, {"seen": True})
    await ctx.deadline("reply", {"days": 1}, on_breach="escalate")
    await ctx.meet_deadline("reply")
    await ctx.deadline("other", {"days": 2})
    return await ctx.cancel_deadline("other")


POLICY = """
sinks:
  "tool://pay": {mutating: true}
agents:
  payer:
    release:
      - {destination: tool://pay, fields: [$.memo], trust: true}
    trusted_signals:
      - {name: pay_to, sender: alice}
  blocked:
    sinks: []
"""


async def _payer(ctx: StepCtx, input: Any) -> Any:
    to = await ctx.wait_signal("pay_to")
    await ctx.release("thanks", destination="tool://pay", field="$.memo", basis="a note")
    return to


async def _blocked(ctx: StepCtx, input: Any) -> Any:
    try:
        return await ctx.tool("pay", {"to": "x", "amount": 5})
    except SinkRefused as exc:
        return exc.type


def _with_policy() -> list[JournalRecord]:
    agents = _registry(_spec("payer", _payer), _spec("blocked", _blocked))
    driver = Driver(agents, tools={"pay": lambda a, k: a}, policy=parse_policy(POLICY))
    driver.run("payer", {}, session_id="payer")
    driver.signal("payer", "pay_to", "bob", sent_by="alice")
    driver.run("blocked", {}, session_id="blocked")
    assert driver.view("payer").output == "bob" and driver.view("blocked").output is not None
    return [r for s in driver.sessions.values() for r in s.journal]


def _trees_and_cases() -> list[JournalRecord]:
    agents = _registry(_spec("child", _child), _spec("parent", _parent), _spec("case", _case_work))
    driver = Driver(agents, cases={"case-1": {"n": 0}})
    driver.run("parent", {}, session_id="parent")
    driver.run("parent", {"wait": True}, session_id="cascading")
    driver.signal(
        "cascading", "runplane.cancel", {"reason": "stop"}, signal_id="c-1", sent_by="ops"
    )
    driver.run("case", {}, session_id="case", case_id="case-1")
    assert {sid: driver.view(sid).status for sid in ("parent", "cascading", "case")} == {
        "parent": RunStatus.COMPLETED,
        "cascading": RunStatus.FAILED,
        "case": RunStatus.COMPLETED,
    }
    return [r for s in driver.sessions.values() for r in s.journal]


_OPEN = SinkDecl("tool://charge", protected=(FieldRule("$.amount", trusted=False),))


class _Billing:
    """A peer that applies a charge once per key; ``get_charge`` is its probe."""

    def __init__(self) -> None:
        self.applied: dict[str, Any] = {}

    def tools(self) -> dict[str, Any]:
        return {
            "charge": lambda args, key: self.applied.setdefault(key, {"charged": args["amount"]}),
            "get_charge": lambda args, key: self.applied.get(key),
            "broken": self._broken,
        }

    @staticmethod
    def _broken(args: Any, key: Any) -> Any:
        raise TerminalError("the peer refused")


def _after_act_once() -> Any:
    fired: list[str] = []

    def hook(phase: str, call: Any) -> bool:
        if phase == "after_act" and call.target == "charge" and not fired:
            fired.append(call.target)
            return True
        return False

    return hook


def _driven() -> list[JournalRecord]:
    records: list[JournalRecord] = []
    specs = (
        _spec("signals", _signals),
        _spec("forever", _waits_forever),
        _spec("fails", _fails, (EffectDecl("broken", mutating=False),)),
        _spec("approval", _approval),
        _spec("panel", _panel),
        _spec("continues", _continues),
        _spec("redeployed", _original),
    )
    agents = _registry(*specs)
    billing = _Billing()
    driver = Driver(agents, tools=billing.tools(), clock=FakeClock())
    driver.run("signals", {}, session_id="sig")
    driver.signal("sig", "go", 1, signal_id="g-1", sent_by="ada")
    driver.signal("sig", "go", 2, signal_id="g-2")  # buffered: the run sleeps
    driver.advance(61_000)
    driver.advance(2_000)  # the "late" wait times out
    driver.run("forever", {}, session_id="cancelled")
    driver.cancel("cancelled", "no longer needed", by="ops")
    driver.run("fails", {}, session_id="failed")
    driver.run("approval", {}, session_id="appr")
    driver.decide("appr", "ESCALATED", comment="needs a lead")
    driver.decide("appr", "APPROVED", by=("bob",))
    driver.run("panel", {}, session_id="pan")
    for task in list(driver.view("pan").open_tasks)[:2]:
        driver.decide("pan", "APPROVED", by=(f"p-{task.task_id[-1]}",), task_id=task.task_id)
    driver.run("continues", {}, session_id="cont")
    driver.run("redeployed", {}, session_id="quarantined")
    driver.agents = _registry(*specs[:-1], _redeployed)
    driver.crash("quarantined")  # the next message rebuilds it with the changed code
    driver.signal("quarantined", "go")
    ends = {sid: driver.view(sid).status for sid in ("sig", "cancelled", "failed", "appr", "pan")}
    assert ends == {
        "sig": RunStatus.COMPLETED,
        "cancelled": RunStatus.FAILED,
        "failed": RunStatus.FAILED,
        "appr": RunStatus.COMPLETED,
        "pan": RunStatus.COMPLETED,
    }
    assert driver.view("quarantined").status is RunStatus.QUARANTINED
    assert driver.view("cont.n1").status is RunStatus.COMPLETED
    for session in driver.sessions.values():
        records.extend(session.journal)

    # Calls in doubt: an operator's verdicts, a reconcile probe, a checkpointed restore.
    for durability, decl, verdicts in (
        (
            Durability.REPLAYABLE,
            EffectDecl("charge", mutating=True),
            ("RETRY", "APPROVED", "ABANDON"),
        ),
        (
            Durability.CHECKPOINTED,
            EffectDecl("charge", mutating=True, recovery=Recovery.RECONCILE, probe="get_charge"),
            (),
        ),
    ):
        peer = _Billing()
        doubtful = _registry(
            _spec("charge", sinks(_OPEN)(_charge), (decl,), durability),
            _spec("ckpt", sinks(_OPEN)(_checkpointed), (decl,), durability),
        )
        d = Driver(doubtful, tools=peer.tools())
        for outcome in verdicts:  # each verdict on a call of its own
            d.crash_hook = _after_act_once()
            d.run("charge", {}, session_id=f"doubt-{outcome}")
            d.decide(f"doubt-{outcome}", outcome, comment=json.dumps({"charged": 7}))
        d.crash_hook = _after_act_once()
        d.run("ckpt", {}, session_id="ckpt")
        for session in d.sessions.values():
            records.extend(session.journal)

    # Repairs of a finished, a failed and an erased run; a run parked on its version.
    failed = driver.view("failed")
    order = core_repair.RepairOrder(core_repair.RepairKind.RESUME, "ops", "retry it")
    records.append(core_repair.resume(failed.snapshot, order, now_ms=1)[0])
    fork = core_repair.RepairOrder(core_repair.RepairKind.FORK, "ops", "try again")
    done = driver.view("cont.n1")
    records.extend(
        core_repair.fork(
            done.snapshot,
            done.journal,
            done.results,
            from_seq=1,
            session_id="forked",
            order=fork,
            now_ms=2,
        ).records
    )
    erased = core_repair.scrub(done.snapshot, core_repair.RETENTION, 3)
    records.append(core_repair.seal_erasure(erased, core_repair.RETENTION, 3, bodies=2)[0])
    waiting = driver.view("cancelled").snapshot
    pan = driver.run("panel", {}, session_id="pan-2").snapshot
    for snap in (pan, replace(waiting, parked_on=None)):
        parked = park_stranded(snap, "1", "version 1 is not deployed", now_ms=5)
        records.extend(parked.records)
        records.extend(release_stranded(parked.snapshot, "1.1", now_ms=6).records)
    records.extend(fail_from_snapshot(pan, "serving it raised", now_ms=7).records)
    # Seq 0 as admission writes it for a pinned, delegated request (and a successor's label).
    admitted, start = run_start(
        "s-u",
        capability="nobody",
        admission_key="runplane.child/parent/0/3",
        tenant="default",
        initiator="ada",
        input_json="{}",
        now_ms=8,
        agent_version="2",
        delegation_json='{"sinks":["tool://pay"]}',
        input_label_json='{"provenance":[],"sensitivity":"INTERNAL","trust":"UNTRUSTED"}',
    )
    records.append(admitted)
    records.extend(fail_unstartable(start, "no such capability", now_ms=9).records)
    return records


def _sweeps() -> list[JournalRecord]:
    """The cases service's sealed runs: a warning's and a breach's."""
    warn = WarnDeadline(
        case_id=CASE, request_id=warn_request_id(CASE, "aperak", DUE), name="aperak", due_ms=DUE
    )
    breach = BreachDeadline(
        case_id=CASE,
        request_id=breach_request_id(CASE, "aperak", DUE),
        name="aperak",
        due_ms=DUE,
        sweep_run_id=sweep_run_id(CASE, "aperak", DUE),
    )
    out: list[JournalRecord] = []
    for cmd in (warn, breach):
        emits, _, _ = emits_for(registered(), cmd, DUE + 1, warn_role="ops")
        out.extend(e.value for e in emits if isinstance(e.value, JournalRecord))
    return out


def _golden() -> list[JournalRecord]:
    out: list[JournalRecord] = []
    for path in sorted((ROOT / "tests" / "replay").glob("golden*/*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))
        out.extend(from_dict(JournalRecord, r) for r in body["journal"])
    return out


def _observed() -> list[JournalRecord]:
    return [*_driven(), *_with_policy(), *_trees_and_cases(), *_sweeps(), *_golden()]


def test_every_key_the_platform_writes_is_documented_under_its_kind() -> None:
    records = _observed()
    assert undocumented(records, SECTIONS) == set()


def test_the_runs_reach_most_kinds() -> None:
    """The check above is only as good as the runs behind it: they must reach the kinds."""
    seen = {r.kind for r in _observed()}
    # CHECKPOINT_REPORTED carries no keys of its own; every other kind must be reached.
    missing = {k for k in JournalKind if k is not JournalKind.OTHER} - seen
    assert missing <= {JournalKind.CHECKPOINT_REPORTED}, sorted(map(str, missing))


def test_every_documented_key_of_a_kind_is_a_name() -> None:
    """Keys are identifiers (lowercase, digits, underscores): what a consumer matches on."""
    for section, keys in SECTIONS.items():
        for key in keys:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", key), (section, key)
