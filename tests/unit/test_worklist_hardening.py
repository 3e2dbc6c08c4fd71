"""The worklist after the security review: claim leases and supervisor release (M7), the
indexed, paginated lists and the tick's active index (M8), deep JSON (m1), a forged expiry
(m3), security headers (m6) and the public origin behind a proxy (M3).

Pure rules and the HTTP layer over the in-memory read model; the real writer, Redis read model
and broker are in ``tests/integration/test_worklist_leases.py``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import httpx
import pytest

from runplane.errors import ConfigError
from runplane.kafka.handler import Incoming, State
from runplane.wire import (
    ClaimTask,
    DecideTask,
    ExpireTask,
    ExpiryPolicy,
    OpenTask,
    ReleaseTask,
    TaskKind,
    TaskRecord,
    TaskStatus,
)
from services.worklist.access import Policy, Refusal, visible_to
from services.worklist.actions import Filter, Worklist
from services.worklist.answers import MAX_JSON_DEPTH, json_too_deep, parse_json
from services.worklist.decide import decide, lapse_claim, next_due_ms
from services.worklist.handler import WorklistHandler
from services.worklist.index import Cursor, MemoryTasks, dimensions, memberships, merged
from services.worklist.settings import WorklistSettings, public_origin

pytestmark = pytest.mark.unit

ROLES = {
    "ivan": frozenset({"finance"}),
    "ada": frozenset({"finance"}),
    "bob": frozenset({"finance"}),
    "sue": frozenset({"supervisor"}),
    "cy": frozenset({"support"}),
}
TTL = 60_000
POLICY = Policy(lambda n: ROLES.get(n, frozenset()), claim_ttl_ms=TTL)


def opened(task_id: str = "run-1/0/1", **kw: object) -> OpenTask:
    fields: dict[str, object] = {
        "task_id": task_id,
        "session_id": task_id.split("/")[0],
        "era": 0,
        "call_seq": 1,
        "kind": TaskKind.APPROVAL,
        "question": "Refund?",
        "answer_json": "{}",
        "capability": "refund",
        "role": "finance",
        "initiator": "ivan",
        "on_expiry": ExpiryPolicy.FAIL,
        "opened_ms": 1_000,
    }
    fields.update(kw)
    return OpenTask(**fields)  # type: ignore[arg-type]


def record(**kw: object) -> TaskRecord:
    v = decide(None, opened(**kw), 1_000, POLICY)
    assert v.task is not None
    return v.task


def claimed(by: str = "ada", at: int = 2_000) -> TaskRecord:
    v = decide(record(), ClaimTask(task_id="run-1/0/1", principal=by, at_ms=at), at, POLICY)
    assert v.task is not None and v.task.status is TaskStatus.CLAIMED
    return v.task


# --- M7: the claim lease and the supervisor's release ----------------------------------------


def test_a_claim_lapses_after_its_lease_and_the_record_says_so() -> None:
    task = claimed(at=2_000)
    assert next_due_ms(task, POLICY) == 2_000 + TTL
    assert lapse_claim(task, 2_000 + TTL - 1, POLICY).task is None  # not yet
    back = lapse_claim(task, 2_000 + TTL, POLICY).task
    assert back is not None and back.status is TaskStatus.OPEN and back.claimed_by is None
    assert back.claim_note is not None and "ada" in back.claim_note and "60 s" in back.claim_note
    assert back.updated_ms == 2_000 + TTL
    # Anyone with the role may claim it now — including someone else.
    v = decide(back, ClaimTask(task_id="run-1/0/1", principal="bob", at_ms=1), 70_000, POLICY)
    assert v.task is not None and v.task.claimed_by == "bob"


def test_no_lease_means_a_claim_never_lapses() -> None:
    forever = dataclasses.replace(POLICY, claim_ttl_ms=None)
    task = claimed()
    assert next_due_ms(task, forever) is None
    assert lapse_claim(task, 10**12, forever).task is None
    with pytest.raises(ValueError):
        Policy(POLICY.roles_of, claim_ttl_ms=0)


def test_the_next_due_instant_is_the_earlier_of_expiry_and_lease() -> None:
    t = record(expires_ms=10_000)
    assert next_due_ms(t, POLICY) == 10_000
    c = decide(t, ClaimTask(task_id="run-1/0/1", principal="ada", at_ms=1), 2_000, POLICY).task
    assert c is not None and next_due_ms(c, POLICY) == 10_000  # expiry first
    c2 = dataclasses.replace(c, task=dataclasses.replace(c.task, expires_ms=10**9))
    assert next_due_ms(c2, POLICY) == 2_000 + TTL
    done = decide(
        c, DecideTask(task_id="run-1/0/1", principal="ada", at_ms=1, approve=True), 3_000, POLICY
    )
    assert done.task is not None and next_due_ms(done.task, POLICY) is None  # final: nothing due


def test_a_supervisor_releases_anyone_s_claim_and_it_is_noted() -> None:
    task = claimed("ada")
    bob = decide(task, ReleaseTask(task_id="run-1/0/1", principal="bob", at_ms=1), 3_000, POLICY)
    assert bob.refused is Refusal.CONFLICT and "claimed by ada" in bob.reason
    sue = decide(task, ReleaseTask(task_id="run-1/0/1", principal="sue", at_ms=1), 3_000, POLICY)
    assert sue.task is not None and sue.task.status is TaskStatus.OPEN
    assert sue.task.claimed_by is None
    assert sue.task.claim_note == "released by sue (role supervisor); it was claimed by ada"
    # Releasing your own claim is not a forced release: no note.
    own = decide(task, ReleaseTask(task_id="run-1/0/1", principal="ada", at_ms=1), 3_000, POLICY)
    assert own.task is not None and own.task.claim_note is None


def test_a_supervisor_sees_claimed_tasks_only() -> None:
    assert not visible_to(record(), "sue", POLICY)
    assert visible_to(claimed("ada"), "sue", POLICY)
    assert not visible_to(claimed("ada"), "cy", POLICY)


# --- m3: a forged ExpireTask --------------------------------------------------------------


def test_a_forged_expire_task_cannot_expire_a_task_early() -> None:
    t = record(expires_ms=10_000)
    forged = ExpireTask(task_id="run-1/0/1", at_ms=10**12)
    early = decide(t, forged, 5_000, POLICY)
    assert early.refused is Refusal.CONFLICT and early.task is None
    assert decide(t, forged, 10_000, POLICY).task is not None  # the writer's clock decides


# --- m1: deep JSON ------------------------------------------------------------------------


def test_deep_json_is_refused_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="deeper"):
        parse_json(deep)
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(ok) is not None
    assert parse_json('{"a": "[[[[[[[["}') == {"a": "[[[[[[[["}  # brackets in strings
    nested: object = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        nested = [nested]
    assert json_too_deep(nested) and not json_too_deep([[1]])
    # An operator's "happened" result that deep is INVALID, not a crash in the writer.
    op = record(kind=TaskKind.OPERATOR, answer_json='{"effect": "tool://x", "request": {}}')
    from runplane.wire import DecisionOutcome

    cmd = DecideTask(
        task_id="run-1/0/1",
        principal="ada",
        at_ms=1,
        approve=True,
        verdict=DecisionOutcome.APPROVED,
        comment=deep[:3000] + deep[-3000:],
    )
    v = decide(op, cmd, 2_000, POLICY)
    assert v.refused is Refusal.INVALID and "deeper" in v.reason


# --- M8: indexes, pagination, the tick's active index -----------------------------------


def test_memberships_name_role_escalation_and_people() -> None:
    t = dataclasses.replace(
        claimed("ada"),
        task=opened(on_expiry=ExpiryPolicy.ESCALATE),
        approved_by=("bob",),
    )
    keys = {k for k, _ in memberships(t)}
    assert keys == {
        f"ix:CLAIMED:{d}" for d in ("all", "role:finance", "esc:", "who:ivan", "who:ada", "who:bob")
    }
    assert "all" in dimensions(
        "sue",
        {"supervisor"},
        TaskStatus.CLAIMED,
        escalation_role="supervisor",
        supervisor_role="supervisor",
    )
    assert "esc:" in dimensions(
        "sue",
        {"supervisor"},
        TaskStatus.OPEN,
        escalation_role="supervisor",
        supervisor_role="supervisor",
    )


def test_merged_reads_every_member_once_in_order_whatever_the_batch() -> None:
    a = [f"{i:016x}:a{i}" for i in range(0, 40, 2)]
    b = [f"{i:016x}:b{i}" for i in range(1, 40, 3)] + a[:5]  # shared members appear once
    sets = {"A": sorted(a), "B": sorted(b)}

    def scan(key: str, after: str, n: int) -> list[str]:
        return [m for m in sets[key] if m > after][:n]

    expected = sorted(set(a) | set(b))
    for batch in (1, 2, 3, 7, 100):
        assert list(merged(["A", "B"], scan, "", batch)) == expected
    assert list(merged(["A", "B"], scan, expected[9], 4)) == expected[10:]


def test_cursor_round_trips_and_refuses_junk() -> None:
    c = Cursor(1, "000000000000abcd:run/0/1")
    assert Cursor.decode(c.encode()) == c
    for junk in ("", "!!", "bm90IGpzb24", Cursor(0, "x").encode()[:-2] + "zz"):
        with pytest.raises(ValueError):
            Cursor.decode(junk)


def _worklist(tasks: MemoryTasks) -> Worklist:
    return Worklist(tasks, _NoSender(), POLICY, clock=lambda: 5_000)


class _NoSender:
    def send(self, command: object) -> object:
        raise AssertionError("listing sends nothing")

    def await_applied(self, sent: object, done: object = None) -> None:
        raise AssertionError("listing waits for nothing")


def test_pages_walk_open_oldest_first_then_done_newest_first_without_repeats() -> None:
    tasks = MemoryTasks()
    from services.worklist.actions import Choice  # noqa: F401  (decide via the pure rules)

    for i in range(7):  # open, opened at 1000+i
        t = record(task_id=f"o{i}/0/1", opened_ms=1_000 + i)
        tasks.tasks[t.task.task_id] = t
    for i in range(6):  # decided at 3000+i
        t = record(task_id=f"d{i}/0/1", opened_ms=500)
        v = decide(
            t,
            DecideTask(task_id=f"d{i}/0/1", principal="bob", at_ms=1, approve=True),
            3_000 + i,
            POLICY,
        )
        assert v.task is not None
        tasks.tasks[f"d{i}/0/1"] = v.task
    other = record(task_id="x/0/1", role="support", initiator="cy")  # ada may not see it
    tasks.tasks["x/0/1"] = other
    wl = _worklist(tasks)
    ada = _principal("ada")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = wl.page(ada, Filter(limit=3, cursor=cursor))
        seen += [t.task.task_id for t in page.tasks]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == [f"o{i}/0/1" for i in range(7)] + [f"d{i}/0/1" for i in reversed(range(6))]
    assert pages >= 5
    assert [t.task.task_id for t in wl.list(ada, Filter(status=TaskStatus.DECIDED, limit=2))] == [
        "d5/0/1",
        "d4/0/1",
    ]
    assert len(wl.list(ada, Filter(active=True, limit=100))) == 7
    assert wl.list(_principal("cy"), Filter(limit=100)) == [other]
    with pytest.raises(ValueError):
        wl.page(ada, Filter(cursor="junk"))


def _principal(name: str) -> object:
    from runplane.serving.auth import Principal

    return Principal(name, "0" * 64, ROLES.get(name, frozenset()))


def _deliver(handler: WorklistHandler, state: State, value: object, now: int) -> list[object]:
    key = value.task_id  # type: ignore[attr-defined]
    emits = handler.handle(state, Incoming("tasks.commands", 0, 0, key, value, now), now)  # type: ignore[arg-type]
    for e in emits:
        if e.topic == "tasks":
            state._stage("tasks", 0, e.key, e.value)
    state._commit()
    return [e.value for e in emits]


def _tick(handler: WorklistHandler, state: State, now: int) -> list[object]:
    emits = handler.tick(state, now)
    for e in emits:
        if e.topic == "tasks":
            state._stage("tasks", 0, e.key, e.value)
    state._commit()
    return [e.value for e in emits]


def test_the_tick_lapses_claims_and_watches_only_what_can_come_due() -> None:
    handler = WorklistHandler(POLICY, gauge_every_ms=0)
    state = State(handler.tables)
    _deliver(handler, state, opened("a/0/1"), 1_000)  # no expiry: but claims will lapse
    _deliver(handler, state, opened("b/0/1", expires_ms=50_000), 1_000)
    _tick(handler, state, 1_000)  # builds the index from the table
    assert handler.due_count() == 1  # only b can come due; a has nothing due yet
    _deliver(handler, state, ClaimTask(task_id="a/0/1", principal="ada", at_ms=1), 2_000)
    assert handler.due_count() == 2  # the claim's lease
    expired = _tick(handler, state, 50_000)
    assert [r.task.task_id for r in expired if isinstance(r, TaskRecord)] == ["b/0/1"]
    assert handler.due_count() == 1  # b is final: out of the index
    assert _tick(handler, state, 2_000 + TTL - 1) == []
    out = _tick(handler, state, 2_000 + TTL)
    lapsed = [r for r in out if isinstance(r, TaskRecord)]
    assert [r.task.task_id for r in lapsed] == ["a/0/1"]
    assert lapsed[0].status is TaskStatus.OPEN and lapsed[0].claim_note
    row = state.get("tasks", "a/0/1")
    assert isinstance(row, TaskRecord) and row.claimed_by is None
    assert handler.due_count() == 0  # a is open with nothing due
    # A decided task leaves the index too.
    _deliver(handler, state, opened("c/0/1", expires_ms=10**9), 70_000)
    assert handler.due_count() == 1
    _deliver(
        handler, state, DecideTask(task_id="c/0/1", principal="ada", at_ms=1, approve=True), 70_001
    )
    assert handler.due_count() == 0


def test_after_a_rebalance_the_index_is_rebuilt_from_the_table() -> None:
    handler = WorklistHandler(POLICY, gauge_every_ms=0)
    state = State(handler.tables)
    # Rows that arrive by restore never pass through handle().
    rows = {f"r{i}/0/1": record(task_id=f"r{i}/0/1", expires_ms=9_000) for i in range(3)}
    done = decide(
        rows["r0/0/1"],
        DecideTask(task_id="r0/0/1", principal="ada", at_ms=1, approve=True),
        2_000,
        POLICY,
    )
    assert done.task is not None
    rows["r0/0/1"] = done.task
    state._load("tasks", 0, rows)
    handler.on_assign([0])
    out = _tick(handler, state, 9_000)
    expired = sorted(r.task.task_id for r in out if isinstance(r, TaskRecord))
    assert expired == ["r1/0/1", "r2/0/1"]
    assert handler.due_count() == 0


# --- M3 / m6: the page behind a proxy, security headers ----------------------------------


def test_public_origin_is_normalised_and_validated() -> None:
    assert public_origin("HTTPS://Worklist.Example.com:443/") == "https://worklist.example.com"
    assert public_origin("http://h:8305") == "http://h:8305"
    assert public_origin("") is None and public_origin(None) is None
    for bad in ("ftp://h", "https://h/path", "https://", "h:80", "https://u:p@h"):
        with pytest.raises(ConfigError):
            public_origin(bad)
    ws = WorklistSettings.from_env(
        {
            "RUNPLANE_WORKLIST_PUBLIC_ORIGIN": "https://w.example",
            "RUNPLANE_WORKLIST_CLAIM_TTL_S": "0",
        }
    )
    assert ws.public_origin == "https://w.example" and ws.claim_ttl_ms is None
    assert WorklistSettings.from_env({}).claim_ttl_ms == 1_800_000
    with pytest.raises(ConfigError):
        WorklistSettings.from_env({"RUNPLANE_WORKLIST_CLAIM_TTL_S": "-1"})


@pytest.fixture
def proxied() -> Iterator[httpx.Client]:
    from runplane.serving.auth import Principals, token_digest
    from runplane.serving.shell import run_http
    from services.worklist.serve import build_app

    principals = Principals.from_data(
        [{"name": "ada", "token_sha256": token_digest("ada-token"), "roles": ["finance"]}]
    )
    tasks = MemoryTasks({"run-1/0/1": record()})
    app = build_app(_worklist(tasks), principals, public_origin="https://worklist.example.com")
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as c,
    ):
        yield c
    stop.set()


def test_behind_a_proxy_origin_is_the_public_one_and_the_cookie_is_secure(
    proxied: httpx.Client,
) -> None:
    # The browser is on https://worklist.example.com; the app sees plain http on loopback.
    inner = proxied.post(
        "/signin",
        data={"token": "ada-token"},
        headers={"Origin": str(proxied.base_url).rstrip("/")},
    )
    assert inner.status_code == 403  # the inner address is not where people are
    ok = proxied.post(
        "/signin", data={"token": "ada-token"}, headers={"Origin": "https://worklist.example.com"}
    )
    assert ok.status_code == 303
    cookie = ok.headers["set-cookie"].lower()
    assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie


def test_security_headers_on_the_page_and_the_api(proxied: httpx.Client) -> None:
    page = proxied.get("/")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    api = proxied.get("/api/me")
    assert api.status_code == 401 and api.headers["x-content-type-options"] == "nosniff"
    assert api.headers["content-security-policy"] == "frame-ancestors 'none'"
    # The docs load Swagger UI from a CDN: they must not get the page's strict policy.
    assert "script-src" not in proxied.get("/docs").headers["content-security-policy"]
