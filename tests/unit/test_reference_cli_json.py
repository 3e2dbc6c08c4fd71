"""docs/reference/cli-json.md is true: each command's ``--json`` prints the keys the page
lists for it — no key unlisted, none listed as always present missing.

Each command runs through the real CLI (``runplane.cli.app``) with its Kafka, Redis and HTTP
clients faked the way the other CLI unit tests fake them; the printed JSON is walked as deep
as the page describes it, and an object the page types as a wire record must have exactly
that record's fields (``schemas/*.avsc``).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers.sample import sample_run
from test_cases_handler import registered
from typer.testing import CliRunner

from runplane.cli import agents as agents_cli
from runplane.cli import app, emit
from runplane.cli import cases as cases_cli
from runplane.cli import journal as journal_cli
from runplane.cli import runs as runs_cli
from runplane.cli import schedules as schedules_cli
from runplane.cli import tasks as tasks_cli
from runplane.cli import tree as tree_cli
from runplane.cli import watch as watch_cli
from runplane.journal.index import RunIndex
from runplane.journal.summary import RunSummary
from runplane.runs.client import RunResult
from runplane.runs.read import RunHistory
from runplane.runs.stream import StreamItem
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    CatchUp,
    ErrorInfo,
    RunStatus,
    Schedule,
    ScheduleFired,
    SessionSnapshot,
    StreamEvent,
    StreamKind,
    TenantId,
)
from services.worklist.api import CallOut, TaskOut

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("reachable_kafka")]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "cli-json.md"
SCHEMAS = ROOT / "schemas"


# ------------------------------------------------------------------------------ the page
@dataclass(frozen=True)
class Key:
    type: str
    always: bool


_HEADING = re.compile(r"^## (runplane .+?)\s*$")
_CELLS = re.compile(r"(?<!\\)\|")
_LIKE = re.compile(r"like `(runplane [^`]+)`(?: without (.+))?")


def _sections(text: str) -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1)
            out[current] = []
        elif current is not None and line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in _CELLS.split(line)[1:-1]]
            out[current].append((cells[0].strip("`"), cells[1], cells[2]))
    return out


def documented(text: str) -> dict[str, dict[str, Key]]:
    """Command → path → Key; a row ``like `runplane X` [without `a`, `b`]`` stands for X's
    keys at its position (``[]``: each element of a top-level array, ``*``: the object)."""
    raw = _sections(text)

    def keys(section: str) -> dict[str, Key]:
        out: dict[str, Key] = {}
        for path, type_, present in raw[section]:
            like = _LIKE.fullmatch(type_)
            if like is None:
                out[path] = Key(type_.strip("`"), present == "always")
                continue
            dropped = set(re.findall(r"`([^`]+)`", like.group(2) or ""))
            prefix = "" if path == "*" else f"{path}."
            for sub, key in keys(like.group(1)).items():
                if sub.split(".")[0] not in dropped:
                    out[prefix + sub] = key
        return out

    return {section: keys(section) for section in raw}


DOCUMENTED = documented(DOC.read_text(encoding="utf-8"))


def avsc_fields(record: str) -> set[str]:
    schema = json.loads((SCHEMAS / f"runplane.v1.{record}.avsc").read_text(encoding="utf-8"))
    return {f["name"] for f in schema["fields"]}


def _record_of(type_: str) -> tuple[str, bool] | None:
    """``AdmissionReply`` / ``ErrorInfo | null`` → (record, False); ``[X]`` → (X, True)."""
    head = type_.split("|")[0].strip()
    listed = head.startswith("[") and head.endswith("]")
    name = head.strip("[]")
    if name[:1].isupper() and (SCHEMAS / f"runplane.v1.{name}.avsc").exists():
        return name, listed
    return None


def printed(value: Any, doc: dict[str, Key]) -> Iterator[tuple[str, Any]]:
    """(path, value) of every key of ``value`` as deep as ``doc`` describes it."""

    def walk(v: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        if isinstance(v, list):
            for item in v:
                yield from walk(item, f"{prefix}[]")
            return
        if not isinstance(v, dict):
            return
        for k, sub in v.items():
            path = f"{prefix}.{k}" if prefix else k
            yield path, sub
            if any(d.startswith((f"{path}.", f"{path}[]")) for d in doc):
                yield from walk(sub, path)

    yield from walk(value, "")


def problems(command: str, value: Any) -> list[str]:
    """What ``value`` (one command's printed JSON) does that the page does not say."""
    doc = DOCUMENTED[command]
    seen = dict(printed(value, doc))
    records = {p: r for p, k in doc.items() if (r := _record_of(k.type)) is not None}
    # A wire-record-typed key stands for its record's fields, and the keys listed under it.
    listed = set(doc) | {
        f"{p}{'[]' if many else ''}.{f}"
        for p, (name, many) in records.items()
        for f in avsc_fields(name)
    }
    out = [f"{command}: {p} printed, not listed" for p in sorted(set(seen) - listed)]
    out += [
        f"{command}: {p} listed as always present, not printed"
        for p, key in sorted(doc.items())
        if key.always and p not in seen and _parent_printed(p, seen)
    ]
    for path, (name, many) in records.items():
        if seen.get(path) is None:
            continue
        inner = f"{path}[]." if many else f"{path}."
        extra = {d.removeprefix(inner) for d in doc if d.startswith(inner)}
        for item in seen[path] if many else [seen[path]]:
            if set(item) != avsc_fields(name) | extra:
                out.append(f"{command}: {path} is not a {name}: {sorted(item)}")
    return out


def _parent_printed(path: str, seen: dict[str, Any]) -> bool:
    """A nested key is expected only where its parent object was printed (and not null)."""
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    parent = parent.removesuffix("[]")
    if not parent:
        return True
    return seen.get(parent) not in (None, [])


# ------------------------------------------------------------------------------ the fakes
RUN = "r-1"
KEY = "order-101"


def _snapshot(**fields: Any) -> SessionSnapshot:
    base: dict[str, Any] = dict(
        session_id=RUN,
        capability="refund",
        status=RunStatus.COMPLETED,
        era=0,
        next_seq=4,
        last_hash="a" * 64,
        admission_key=KEY,
        tenant=TenantId("default"),
        initiator="alice",
        input_json='{"invoice_id":"inv-7"}',
        output_json='{"refunded":12}',
        started_ms=1,
        updated_ms=2,
    )
    base.update(fields)
    return SessionSnapshot(**base)


class _Client:
    """``sessions`` and ``admission.claims`` as the compacted tables hold them."""

    tables: ClassVar[dict[tuple[str, str], object]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None: ...

    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> object | None:
        return self.tables.get((topic, key))

    def admit(self, *args: Any, wait: bool = False, **kwargs: Any) -> AdmissionReply | RunResult:
        reply = AdmissionReply(
            admission_key=KEY, outcome=AdmissionOutcome.ADMITTED, run_id=RUN, replied_ms=1
        )
        return RunResult(reply, _snapshot()) if wait else reply

    async def stream(self, run_id: str, *, after: int | None = None) -> AsyncIterator[StreamItem]:
        for i, (kind, payload) in enumerate(
            [(StreamKind.TEXT_DELTA, {"text": "hi"}), (StreamKind.ENDED, {"status": "completed"})]
        ):
            event = StreamEvent(
                session_id=run_id,
                era=0,
                call_seq=-1 if kind is StreamKind.ENDED else 0,
                attempt=1_700_000_000_000,
                seq=i,
                kind=kind,
                payload_json=json.dumps(payload),
                stamp_ms=10 + i,
            )
            yield StreamItem(i, event)


class _Index:
    def __init__(self, runs: dict[str, RunSummary]) -> None:
        self.runs = runs

    def get(self, run_id: str) -> RunSummary | None:
        return self.runs.get(run_id)

    def offsets(self) -> dict[int, int]:
        return {0: 1}

    def list(self, f: Any) -> list[RunSummary]:
        return list(self.runs.values())


def _histories() -> dict[str, RunHistory]:
    records, results = sample_run(RUN, calls=1)
    broken, broken_bodies = sample_run("r-bad", calls=1)
    broken[2] = replace(broken[2], hash="f" * 64)
    return {
        RUN: RunHistory(RUN, 0, tuple(records), dict(results)),
        "r-bad": RunHistory("r-bad", 0, tuple(broken), dict(broken_bodies)),
    }


def _task() -> dict[str, Any]:
    task = TaskOut(
        task_id="t-1",
        session_id=RUN,
        era=0,
        call_seq=2,
        kind="OPERATOR",
        question="Did it happen?",
        answer={"effect": "tool://charge"},
        case_id=None,
        capability="refund",
        role="operator",
        approvals=1,
        approved_by=[],
        initiator="alice",
        status="OPEN",
        claimed_by=None,
        claim_expires_ms=None,
        claim_note=None,
        outcome=None,
        comment="",
        expires_ms=None,
        on_expiry="ESCALATE",
        allow_unattended=False,
        escalate_to=None,
        opened_ms=1,
        updated_ms=2,
        call=CallOut(name="tool://charge", args={"amount": 7}, idempotency_key="k"),
        choices=["retry", "happened", "abandon"],
        you_may_act=True,
        why_not=None,
    )
    return task.model_dump(mode="json")


def _schedules(settings: Any, keys: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    schedule = Schedule(
        tenant=TenantId("default"),
        name="nightly",
        capability="refund",
        input_json="{}",
        initiator="alice",
        cron="0 2 * * *",
        tz="UTC",
        every_ms=None,
        anchor_ms=0,
        catch_up=CatchUp.SKIP,
        catch_up_max=1,
        paused=False,
        since_ms=0,
        created_ms=1,
        updated_ms=2,
        updated_by="alice",
    )
    fired = ScheduleFired(tenant=TenantId("default"), name="nightly", through_ms=5, updated_ms=6)
    return {"default/nightly": schedule}, {"default/nightly": fired}


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    _Client.tables = {
        ("sessions", RUN): _snapshot(),
        ("admission.claims", KEY): AdmissionClaim(
            admission_key=KEY,
            run_id=RUN,
            capability="refund",
            tenant=TenantId("default"),
            status=RunStatus.COMPLETED,
            admitted_ms=1,
            updated_ms=2,
        ),
    }
    histories = _histories()

    def read_run(settings: Any, run_id: str, **_: Any) -> RunHistory:
        return histories.get(run_id, RunHistory(run_id, 0, ()))

    for module in (journal_cli, emit, watch_cli):
        monkeypatch.setattr(module, "Client", _Client)
    for module in (journal_cli, tree_cli, runs_cli):
        monkeypatch.setattr(module, "read_run", read_run, raising=False)
    monkeypatch.setattr(journal_cli, "journal_run_ids", lambda settings, **_: sorted(histories))
    monkeypatch.setattr(journal_cli, "_erased_since", lambda *a: 2)
    summary = RunSummary(RUN, status=RunStatus.COMPLETED, capability="refund", records=4)
    index = _Index({RUN: summary})
    monkeypatch.setattr(RunIndex, "from_url", classmethod(lambda cls, *a: index))
    monkeypatch.setattr(runs_cli, "read_audit", lambda *a, **k: [])
    monkeypatch.setattr(cases_cli, "read_case", lambda settings, case_id, **_: registered())
    monkeypatch.setattr(schedules_cli, "read_tables", _schedules)
    monkeypatch.setattr(agents_cli, "read_snapshots", lambda settings: [_snapshot()])
    monkeypatch.setattr(agents_cli, "in_flight", lambda snaps: list(snaps))

    def call(method: str, url: str, path: str, token: str, body: Any = None, **_: Any) -> Any:
        return {"tasks": [_task()], "cursor": None} if path == "/api/tasks" else _task()

    monkeypatch.setattr(tasks_cli, "_call", call)
    monkeypatch.setenv("RUNPLANE_INITIATOR", "alice")


def _json(*args: str, lines: bool = False) -> tuple[int, Any]:
    result = CliRunner().invoke(app, [*args, "--json"])
    out = result.stdout
    assert out.strip(), (result.exit_code, result.stderr, result.exception)
    if lines:
        return result.exit_code, [json.loads(line) for line in out.splitlines() if line]
    return result.exit_code, json.loads(out)


# ------------------------------------------------------------------------------ the commands
# (section, argv, exit code); each prints what its section lists.
CASES: list[tuple[str, tuple[str, ...], int]] = [
    ("runplane emit", ("emit", "refund", "--key", KEY), 0),
    ("runplane emit", ("emit", "refund", "--key", KEY, "--wait"), 0),
    (
        "runplane replay",
        ("replay", str(ROOT / "tests" / "replay" / "golden" / "refund_approved.json")),
        0,
    ),
    ("runplane journal show", ("journal", "show", RUN), 0),
    ("runplane journal show", ("journal", "show", KEY, "--bodies"), 0),
    ("runplane journal verify (one run)", ("journal", "verify", RUN), 0),
    ("runplane journal verify (one run)", ("journal", "verify", "r-bad"), 1),
    ("runplane journal verify (several runs)", ("journal", "verify", RUN, "r-bad", "r-typo"), 1),
    ("runplane journal verify (several runs)", ("journal", "verify", "--all"), 1),
    ("runplane cases show", ("cases", "show", "c-42"), 0),
    ("runplane tasks list", ("tasks", "list", "--token", "t"), 0),
    ("runplane tasks show", ("tasks", "show", "t-1", "--token", "t"), 0),
    ("runplane tasks decide", ("tasks", "decide", "t-1", "retry", "--token", "t"), 0),
    ("runplane runs list", ("runs", "list"), 0),
    ("runplane runs show", ("runs", "show", KEY), 0),
    ("runplane runs tree", ("runs", "tree", RUN), 0),
    ("runplane agents list", ("agents", "list"), 0),
    ("runplane schedules list", ("schedules", "list", "--next", "2"), 0),
]


@pytest.mark.parametrize(("section", "argv", "code"), CASES, ids=[" ".join(c[1]) for c in CASES])
def test_the_json_printed_is_the_json_documented(
    section: str, argv: tuple[str, ...], code: int
) -> None:
    exit_code, value = _json(*argv)
    assert exit_code == code, value
    assert problems(section, value) == []


def test_runs_watch_prints_a_documented_object_per_line() -> None:
    exit_code, events = _json("runs", "watch", RUN, lines=True)
    assert exit_code == 0 and [e["kind"] for e in events] == ["TEXT_DELTA", "ENDED"]
    for event in events:
        assert problems("runplane runs watch", event) == []


def test_every_command_with_json_has_a_section_and_a_run_here() -> None:
    """The page covers every command that takes ``--json`` (walking the typer app), and each
    section is run above — a new ``--json`` fails here until it is documented and tested."""
    from typer.main import get_command

    def leaves(cmd: Any, path: tuple[str, ...]) -> Iterable[tuple[str, ...]]:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from leaves(sub, (*path, name))
        if not hasattr(cmd, "commands") and any(
            "--json" in getattr(p, "opts", []) for p in cmd.params
        ):
            yield path

    commands = {"runplane " + " ".join(p) for p in leaves(get_command(app), ())}
    sections = {re.sub(r" \(.*\)$", "", s) for s in DOCUMENTED}
    assert commands == sections
    tested = {c[0] for c in CASES} | {"runplane runs watch"}
    assert tested == set(DOCUMENTED)


def test_the_checker_names_a_key_the_page_does_not_list() -> None:
    _, value = _json("runs", "show", RUN)
    value["surprise"] = 1
    del value["era"]
    assert problems("runplane runs show", value) == [
        "runplane runs show: surprise printed, not listed",
        "runplane runs show: era listed as always present, not printed",
    ]
    _, emitted = _json("emit", "refund", "--key", KEY)
    emitted["reply"]["extra"] = 1
    assert problems("runplane emit", emitted) == [
        "runplane emit: reply is not a AdmissionReply: "
        + str(sorted([*avsc_fields("AdmissionReply"), "extra"]))
    ]


def test_an_error_is_the_named_exit_code_and_nothing_on_stdout() -> None:
    result = CliRunner().invoke(app, ["journal", "verify", "r-typo", "--json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "no such run" in result.stderr


def test_a_failed_run_shows_its_error_as_an_error_info() -> None:
    _Client.tables[("sessions", RUN)] = _snapshot(
        status=RunStatus.FAILED,
        output_json=None,
        error=ErrorInfo(type="RunCancelled", message="wrong customer"),
    )
    _, shown = _json("runs", "show", RUN)
    assert shown["error"] == {
        "type": "RunCancelled",
        "message": "wrong customer",
        "retryable": False,
    }
    assert problems("runplane runs show", shown) == []
