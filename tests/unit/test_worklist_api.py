"""The worklist's HTTP API and page over an in-memory read model.

The writer here is the same pure ``decide`` the real processor runs, applied synchronously;
the integration tests run the real processor on the real broker.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from runplane.cli.tasks import tasks_app
from runplane.serving.auth import Principal, Principals, PrincipalsFile, token_digest
from runplane.serving.shell import run_http
from runplane.wire import (
    ClaimTask,
    DecideTask,
    DecisionOutcome,
    ExpiryPolicy,
    OpenTask,
    ReleaseTask,
    TaskDecision,
    TaskKind,
    TaskRecord,
)
from services.worklist.access import Policy
from services.worklist.actions import ActionError, Choice, Worklist
from services.worklist.decide import decide
from services.worklist.gateway import Sent
from services.worklist.index import MemoryTasks
from services.worklist.serve import build_app

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


def principal(name: str, *roles: str) -> Principal:
    return Principal(name, hashlib.sha256(f"{name}-token".encode()).hexdigest(), frozenset(roles))


PRINCIPALS = Principals(
    (
        principal("ivan", "finance"),
        principal("ada", "finance"),
        principal("bob", "finance"),
        principal("cy", "support"),
        principal("sue", "supervisor"),
        principal("olga", "operator"),
    )
)
POLICY = Policy(PRINCIPALS.roles_of)


class MemoryWriter:
    """Read model + writer in one dict: each sent command is decided at once."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskRecord] = {}
        self.decisions: list[TaskDecision] = []
        self.sent: list[ClaimTask | ReleaseTask | DecideTask] = []
        self.interfere: Callable[[], None] | None = None

    def get(self, task_id: str) -> TaskRecord | None:
        return self.tasks.get(task_id)

    def get_many(self, task_ids: Sequence[str]) -> list[TaskRecord | None]:
        return MemoryTasks(self.tasks).get_many(task_ids)

    def scan(self, key: str, after: str, n: int) -> list[str]:
        return MemoryTasks(self.tasks).scan(key, after, n)

    def open(self, task_id: str = "run-1/0/1", **kw: object) -> None:
        fields: dict[str, object] = {
            "task_id": task_id,
            "session_id": task_id.split("/")[0],
            "era": 0,
            "call_seq": 1,
            "kind": TaskKind.APPROVAL,
            "question": "Refund 1200 cents on invoice INV-7?",
            "answer_json": '{"amount_cents":1200,"invoice_id":"INV-7"}',
            "case_id": "case-1",
            "capability": "refund",
            "role": "finance",
            "approvals": 1,
            "initiator": "ivan",
            "on_expiry": ExpiryPolicy.FAIL,
            "opened_ms": NOW - 60_000,
        }
        fields.update(kw)
        v = decide(None, OpenTask(**fields), NOW - 60_000, POLICY)  # type: ignore[arg-type]
        assert v.task is not None
        self.tasks[task_id] = v.task

    def send(self, command: ClaimTask | ReleaseTask | DecideTask) -> Sent:
        self.sent.append(command)
        if self.interfere is not None:
            self.interfere()
        v = decide(self.tasks.get(command.task_id), command, NOW, POLICY)
        if v.task is not None:
            self.tasks[command.task_id] = v.task
        if v.decision is not None:
            self.decisions.append(v.decision)
        return Sent(0, len(self.sent))

    def await_applied(self, sent: Sent, done: Callable[[], bool] | None = None) -> None:
        return None


@pytest.fixture
def writer() -> MemoryWriter:
    w = MemoryWriter()
    w.open()
    return w


def serve(writer: MemoryWriter, policy: Policy, principals: Principals) -> Iterator[httpx.Client]:
    """The worklist app over ``writer``, on a real server on a free loopback port: the HTTP
    layer exactly as deployed."""
    app = build_app(Worklist(writer, writer, policy, clock=lambda: NOW), principals)
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        url = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=url, follow_redirects=True, timeout=10) as c:
            yield c
    stop.set()


@pytest.fixture
def client(writer: MemoryWriter) -> Iterator[httpx.Client]:
    yield from serve(writer, POLICY, PRINCIPALS)


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


def test_no_or_unknown_token_is_401(client: httpx.Client) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
        r = client.get("/api/tasks", headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["detail"]
    assert client.get("/api/me", headers=auth("ada")).json() == {
        "name": "ada",
        "roles": ["finance"],
        "tenant": "default",
    }


def test_list_and_show_carry_the_question_and_the_proposed_answer(client: httpx.Client) -> None:
    r = client.get("/api/tasks", headers=auth("ada"), params={"status": "OPEN", "role": "finance"})
    assert r.status_code == 200
    (task,) = r.json()["tasks"]
    assert task["answer"] == {"amount_cents": 1200, "invoice_id": "INV-7"}
    assert task["you_may_act"] is True
    mine = client.get("/api/tasks", headers=auth("ivan"), params={"actionable": True})
    assert mine.json()["tasks"] == []  # the initiator may not act on it
    shown = client.get("/api/tasks/run-1/0/1", headers=auth("ivan")).json()
    assert shown["you_may_act"] is False and "four-eyes" in shown["why_not"]
    assert client.get("/api/tasks", headers=auth("ada"), params={"case": "other"}).json() == {
        "tasks": [],
        "cursor": None,  # nothing follows (pagination, review M8)
    }


def test_the_initiators_decision_is_403_with_the_reason(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    r = client.post(
        "/api/tasks/run-1/0/1/decide", headers=auth("ivan"), json={"decision": "approve"}
    )
    assert r.status_code == 403 and "four-eyes" in r.json()["detail"]
    assert writer.sent == [] and writer.decisions == []


def test_wrong_role_403_unknown_task_404_claimed_409(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    # sue sees the task (it would escalate to her role) but does not hold its role: 403.
    writer.open("run-3/0/1", on_expiry=ExpiryPolicy.ESCALATE)
    r = client.post("/api/tasks/run-3/0/1/claim", headers=auth("sue"))
    assert r.status_code == 403 and "finance" in r.json()["detail"]
    assert client.post("/api/tasks/nope/claim", headers=auth("ada")).status_code == 404
    assert client.get("/api/tasks/nope", headers=auth("ada")).status_code == 404
    assert (
        client.post("/api/tasks/run-1/0/1/claim", headers=auth("ada")).json()["claimed_by"] == "ada"
    )
    r = client.post(
        "/api/tasks/run-1/0/1/decide", headers=auth("bob"), json={"decision": "approve"}
    )
    assert r.status_code == 409 and "claimed by ada" in r.json()["detail"]
    assert client.post("/api/tasks/run-1/0/1/release", headers=auth("bob")).status_code == 409
    released = client.post("/api/tasks/run-1/0/1/release", headers=auth("ada")).json()
    assert released["status"] == "OPEN" and released["claimed_by"] is None


def test_another_principals_approval_sends_the_decision(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    r = client.post(
        "/api/tasks/run-1/0/1/decide",
        headers=auth("ada"),
        json={"decision": "approve", "comment": "ok"},
    )
    assert (
        r.status_code == 200
        and r.json()["status"] == "DECIDED"
        and r.json()["outcome"] == "APPROVED"
    )
    (d,) = writer.decisions
    assert d.decided_by == ("ada",) and d.comment == "ok" and d.session_id == "run-1"
    again = client.post(
        "/api/tasks/run-1/0/1/decide", headers=auth("bob"), json={"decision": "reject"}
    )
    assert again.status_code == 409


def test_two_approvals_need_two_people(client: httpx.Client, writer: MemoryWriter) -> None:
    writer.open("run-2/0/1", approvals=2)
    first = client.post(
        "/api/tasks/run-2/0/1/decide", headers=auth("ada"), json={"decision": "approve"}
    )
    assert first.status_code == 200 and first.json()["status"] == "OPEN"
    twice = client.post(
        "/api/tasks/run-2/0/1/decide", headers=auth("ada"), json={"decision": "approve"}
    )
    assert twice.status_code == 403 and "already approved" in twice.json()["detail"]
    assert writer.decisions == []
    second = client.post(
        "/api/tasks/run-2/0/1/decide", headers=auth("bob"), json={"decision": "approve"}
    )
    assert second.json()["approved_by"] == ["ada", "bob"]
    assert [d.decided_by for d in writer.decisions] == [("ada", "bob")]


def test_a_race_lost_at_the_writer_is_409_with_the_reason(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    def bob_claims_first() -> None:
        writer.interfere = None
        v = decide(
            writer.tasks["run-1/0/1"],
            ClaimTask(task_id="run-1/0/1", principal="bob", at_ms=NOW),
            NOW,
            POLICY,
        )
        assert v.task is not None
        writer.tasks["run-1/0/1"] = v.task

    writer.interfere = bob_claims_first
    r = client.post("/api/tasks/run-1/0/1/claim", headers=auth("ada"))
    assert r.status_code == 409 and "claimed by bob" in r.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        "{}",
        '{"decision": "maybe"}',
        '{"decision": "approve", "comment": "' + "x" * 4001 + '"}',
        '{"decision": "approve", "comment": "\\ud800"}',  # a lone surrogate, legal JSON
        '{"decision": "approve"',
        "[]",
    ],
)
def test_malformed_decisions_are_422(client: httpx.Client, writer: MemoryWriter, body: str) -> None:
    headers = {**auth("ada"), "Content-Type": "application/json"}
    r = client.post("/api/tasks/run-1/0/1/decide", headers=headers, content=body.encode())
    assert r.status_code == 422, r.text
    assert writer.sent == []


def test_the_body_cannot_name_the_actor(client: httpx.Client, writer: MemoryWriter) -> None:
    r = client.post(
        "/api/tasks/run-1/0/1/decide",
        headers=auth("ada"),
        json={"decision": "approve", "principal": "ivan", "decided_by": ["ivan"]},
    )
    assert r.status_code == 200
    assert writer.decisions[0].decided_by == ("ada",)


def test_openapi_describes_the_actions(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/api/tasks",
        "/api/tasks/{task_id}/decide",
        "/api/tasks/{task_id}/claim",
        "/api/me",
    } <= set(paths)
    assert not any(p.startswith("/signin") or p == "/" for p in paths)


# --- the page --------------------------------------------------------------------------------


def test_page_sign_in_claim_and_approve(client: httpx.Client, writer: MemoryWriter) -> None:
    assert "Sign in" in client.get("/").text
    bad = client.post("/signin", data={"token": "wrong"})
    assert bad.status_code == 401 and "not known" in bad.text
    client.post("/signin", data={"token": "ada-token"})
    home = client.get("/")
    assert "Signed in as <strong>ada</strong>" in home.text
    assert "Refund 1200 cents on invoice INV-7?" in home.text
    href = re.search(r'href="(/tasks/[^"]+)"', home.text)
    assert href is not None
    page = client.get(href.group(1))
    assert "&quot;amount_cents&quot;: 1200" in page.text  # pretty JSON, escaped
    claimed = client.post(href.group(1) + "/claim")
    assert "You hold the claim" in claimed.text and "claimed by ada" in claimed.text
    done = client.post(
        href.group(1) + "/decide", data={"decision": "approve", "comment": "<b>fine</b>"}
    )
    assert "Decided: approved" in done.text
    assert "&lt;b&gt;fine&lt;/b&gt;" in done.text and "<b>fine</b>" not in done.text
    assert writer.decisions[0].comment == "<b>fine</b>"


def test_page_shows_why_the_initiator_cannot_act(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    client.post("/signin", data={"token": "ivan-token"})
    assert "Nothing is waiting for you." in client.get("/").text
    r = client.post("/tasks/run-1%2F0%2F1/decide", data={"decision": "approve"})
    assert "four-eyes" in r.text and writer.decisions == []


def test_page_refuses_cross_site_posts(client: httpx.Client, writer: MemoryWriter) -> None:
    client.post("/signin", data={"token": "ada-token"})
    r = client.post(
        "/tasks/run-1%2F0%2F1/decide",
        data={"decision": "approve"},
        headers={"Origin": "https://evil.example"},
    )
    assert r.status_code == 403 and writer.decisions == []


# --- visibility ------------------------------------------------------------------------------


def _ids(client: httpx.Client, who: str) -> set[str]:
    r = client.get("/api/tasks", headers=auth(who))
    assert r.status_code == 200, r.text
    return {t["task_id"] for t in r.json()["tasks"]}


def test_a_task_is_visible_only_to_its_role_escalation_and_people_involved(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    writer.open("run-esc/0/1", on_expiry=ExpiryPolicy.ESCALATE)  # would go to supervisor
    writer.open("run-ops/0/1/operator", kind=TaskKind.OPERATOR, role="operator", initiator="cy")
    assert _ids(client, "ada") == {"run-1/0/1", "run-esc/0/1"}  # role finance
    assert _ids(client, "ivan") == {"run-1/0/1", "run-esc/0/1"}  # initiator (and the role)
    assert _ids(client, "sue") == {"run-esc/0/1"}  # the escalation role only
    assert _ids(client, "cy") == {"run-ops/0/1/operator"}  # initiated it, holds no role
    assert _ids(client, "olga") == {"run-ops/0/1/operator"}


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/api/tasks/run-1/0/1"),
        ("POST", "/api/tasks/run-1/0/1/claim"),
        ("POST", "/api/tasks/run-1/0/1/release"),
        ("POST", "/api/tasks/run-1/0/1/decide"),
    ],
)
def test_a_task_you_may_not_see_is_404_like_one_that_does_not_exist(
    client: httpx.Client, writer: MemoryWriter, method: str, path: str
) -> None:
    body = {"decision": "approve"} if path.endswith("decide") else None
    hidden = client.request(method, path, headers=auth("cy"), json=body)
    missing = client.request(method, path.replace("run-1", "run-x"), headers=auth("cy"), json=body)
    assert hidden.status_code == missing.status_code == 404
    assert "Refund" not in hidden.text and writer.sent == []


def test_who_claimed_or_decided_still_sees_the_task_after_losing_the_role(
    writer: MemoryWriter,
) -> None:
    wl = Worklist(writer, writer, POLICY, clock=lambda: NOW)
    ada = PRINCIPALS.get("ada")
    assert ada is not None
    wl.decide(ada, "run-1/0/1", Choice.APPROVE)
    # The same name without the role (a rotated principals file) keeps seeing what they decided.
    demoted = Policy(lambda name: frozenset())
    wl2 = Worklist(writer, writer, demoted, clock=lambda: NOW)
    assert wl2.show(ada, "run-1/0/1").outcome is DecisionOutcome.APPROVED
    bob = PRINCIPALS.get("bob")
    assert bob is not None
    with pytest.raises(ActionError) as err:
        wl2.show(bob, "run-1/0/1")
    assert err.value.status == 404


def test_the_page_hides_tasks_you_may_not_see(client: httpx.Client) -> None:
    client.post("/signin", data={"token": "cy-token"})
    assert "Refund 1200 cents" not in client.get("/").text
    r = client.get("/tasks/run-1%2F0%2F1")
    assert r.status_code == 404 and "Refund 1200 cents" not in r.text


# --- operator verdicts -----------------------------------------------------------------------

OPERATOR_ID = "run-9/0/2/operator"


@pytest.fixture
def operator_task(writer: MemoryWriter) -> str:
    writer.open(
        OPERATOR_ID,
        kind=TaskKind.OPERATOR,
        call_seq=2,
        role="operator",
        question="Did tool://billing/charge (call 2 of run run-9) take effect?",
        answer_json='{"effect":"tool://billing/charge","request":{"args":{"amount_cents":1200},'
        '"idempotency_key":"inv-7","tool":"billing/charge"}}',
        on_expiry=ExpiryPolicy.ESCALATE,
    )
    return OPERATOR_ID


def _decide(client: httpx.Client, task_id: str, who: str, body: object) -> httpx.Response:
    return client.post(f"/api/tasks/{task_id}/decide", headers=auth(who), json=body)


@pytest.mark.parametrize(
    "body, outcome, comment",
    [
        ({"decision": "retry", "comment": "ledger shows nothing"}, "RETRY", "ledger shows nothing"),
        ({"decision": "abandon", "comment": "customer cancelled"}, "ABANDON", "customer cancelled"),
        (
            {"decision": "happened", "result": {"charge_id": "ch_1", "ok": True}},
            "APPROVED",
            '{"charge_id":"ch_1","ok":true}',
        ),
        ({"decision": "happened"}, "APPROVED", ""),
    ],
)
def test_each_operator_verdict_reaches_the_run(
    client: httpx.Client,
    writer: MemoryWriter,
    operator_task: str,
    body: dict[str, object],
    outcome: str,
    comment: str,
) -> None:
    shown = client.get(f"/api/tasks/{operator_task}", headers=auth("olga")).json()
    assert shown["choices"] == ["retry", "happened", "abandon"]
    assert shown["call"] == {
        "name": "tool://billing/charge",
        "args": {"amount_cents": 1200},
        "idempotency_key": "inv-7",
    }
    r = _decide(client, operator_task, "olga", body)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "DECIDED" and r.json()["outcome"] == outcome
    (d,) = writer.decisions
    assert (str(d.outcome), d.comment, d.decided_by) == (outcome, comment, ("olga",))
    assert (d.session_id, d.task_id, d.call_seq) == ("run-9", operator_task, 2)
    (sent,) = writer.sent
    assert isinstance(sent, DecideTask) and sent.principal == "olga"


@pytest.mark.parametrize(
    "task, who, body, needle",
    [
        ("op", "olga", {"decision": "approve"}, "operator task is answered with a verdict"),
        ("op", "olga", {"decision": "reject"}, "operator task is answered with a verdict"),
        ("approval", "ada", {"decision": "retry"}, "RETRY is an operator verdict"),
        ("approval", "ada", {"decision": "happened"}, "APPROVED is an operator verdict"),
        ("op", "olga", {"decision": "retry", "result": 1}, "only with the decision 'happened'"),
        ("op", "olga", {"decision": "happened", "comment": "x"}, "not a comment"),
    ],
)
def test_a_decision_of_the_wrong_kind_is_422_with_a_message(
    client: httpx.Client,
    writer: MemoryWriter,
    operator_task: str,
    task: str,
    who: str,
    body: object,
    needle: str,
) -> None:
    task_id = operator_task if task == "op" else "run-1/0/1"
    r = _decide(client, task_id, who, body)
    assert r.status_code == 422 and needle in r.text, r.text
    assert writer.sent == [] and writer.decisions == []


def test_operator_verdicts_keep_the_role_and_four_eyes_checks(
    client: httpx.Client, writer: MemoryWriter, operator_task: str
) -> None:
    # ada holds finance, not operator, and the task is not hers to see: 404.
    assert _decide(client, operator_task, "ada", {"decision": "retry"}).status_code == 404
    # sue sees it (escalation role) but may not decide it.
    r = _decide(client, operator_task, "sue", {"decision": "retry"})
    assert r.status_code == 403 and "operator" in r.json()["detail"]
    writer.open("run-8/0/1/operator", kind=TaskKind.OPERATOR, role="operator", initiator="olga")
    r = _decide(client, "run-8/0/1/operator", "olga", {"decision": "abandon"})
    assert r.status_code == 403 and "four-eyes" in r.json()["detail"]
    assert writer.decisions == []


def test_the_page_offers_the_three_verdicts_and_sends_the_observed_result(
    client: httpx.Client, writer: MemoryWriter, operator_task: str
) -> None:
    client.post("/signin", data={"token": "olga-token"})
    href = "/tasks/" + operator_task.replace("/", "%2F")
    page = client.get(href).text
    assert "The call in doubt" in page and "tool://billing/charge" in page
    assert "&quot;amount_cents&quot;: 1200" in page and "inv-7" in page
    for value in ("happened", "retry", "abandon"):
        assert f'name="decision" value="{value}"' in page
    assert 'value="approve"' not in page
    bad = client.post(href + "/decide", data={"decision": "happened", "result": "{not json"})
    assert "must be JSON" in bad.text and writer.decisions == []
    done = client.post(href + "/decide", data={"decision": "happened", "result": '{"id": 7}'})
    assert "Decided: happened" in done.text
    assert "(happened)" in done.text and "(APPROVED)" not in done.text
    (d,) = writer.decisions
    assert str(d.outcome) == "APPROVED" and d.comment == '{"id":7}'


# --- principals reload -----------------------------------------------------------------------


def test_a_rotated_principals_file_takes_effect_without_a_restart(
    tmp_path: Path, writer: MemoryWriter
) -> None:
    def write(roles: dict[str, str]) -> None:
        lines = ["principals:"] + [
            f"  - {{name: {n}, token_sha256: {token_digest(n + '-token')}, roles: [{r}]}}"
            for n, r in roles.items()
        ]
        new = tmp_path / "next.yaml"
        new.write_text("\n".join(lines) + "\n")
        os.replace(new, tmp_path / "principals.yaml")

    write({"ada": "finance"})
    source = PrincipalsFile(tmp_path / "principals.yaml")
    policy = Policy(source.roles_of)  # the writer's role checks read the same source
    app = build_app(Worklist(writer, writer, policy, clock=lambda: NOW), source)
    with (
        run_http(app, "127.0.0.1", 0, threading.Event()) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as c,
    ):
        assert c.get("/api/me", headers=auth("bob")).status_code == 401
        assert c.get("/api/tasks/run-1/0/1", headers=auth("ada")).status_code == 200
        write({"bob": "finance", "ada": "support"})  # bob added, ada moved to another role
        assert c.get("/api/me", headers=auth("bob")).json() == {
            "name": "bob",
            "roles": ["finance"],
            "tenant": "default",
        }
        assert c.get("/api/tasks/run-1/0/1", headers=auth("ada")).status_code == 404
        r = c.post("/api/tasks/run-1/0/1/decide", headers=auth("bob"), json={"decision": "approve"})
        assert r.status_code == 200 and r.json()["outcome"] == "APPROVED"


# --- the CLI ---------------------------------------------------------------------------------


def test_the_cli_shows_the_call_and_sends_each_verdict(
    client: httpx.Client, writer: MemoryWriter, operator_task: str
) -> None:
    runner = CliRunner()
    url = str(client.base_url)
    base = ["--token", "olga-token", "--url", url]
    shown = runner.invoke(tasks_app, ["show", operator_task, *base])
    assert shown.exit_code == 0, shown.output
    assert "tool://billing/charge" in shown.output and "retry | happened | abandon" in shown.output
    wrong = runner.invoke(tasks_app, ["decide", operator_task, "approve", *base])
    assert wrong.exit_code == 1 and "verdict" in wrong.output
    bad = runner.invoke(tasks_app, ["decide", operator_task, "happened", "--result", "{x", *base])
    assert bad.exit_code == 2 and writer.decisions == []
    done = runner.invoke(
        tasks_app, ["decide", operator_task, "happened", "--result", '{"id": 7}', *base]
    )
    assert done.exit_code == 0, done.output
    assert "happened (APPROVED) by olga" in done.output
    (d,) = writer.decisions
    assert d.comment == '{"id":7}'


# --- the security review: supervisor release (M7), deep JSON (m1), pagination (M8) ----------


def test_a_supervisor_releases_someone_elses_claim_through_the_api(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    assert client.post("/api/tasks/run-1/0/1/claim", headers=auth("ada")).status_code == 200
    held = client.get("/api/tasks/run-1/0/1", headers=auth("ada")).json()
    assert held["claim_expires_ms"] == held["updated_ms"] + 1_800_000
    bob = client.post("/api/tasks/run-1/0/1/release", headers=auth("bob"))
    assert bob.status_code == 409 and "claimed by ada" in bob.json()["detail"]
    # sue holds only "supervisor": she sees the claimed task, and may take the claim back.
    assert "run-1/0/1" in _ids(client, "sue")
    r = client.post("/api/tasks/run-1/0/1/release", headers=auth("sue"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "OPEN" and body["claimed_by"] is None
    assert body["claim_note"] == "released by sue (role supervisor); it was claimed by ada"
    assert isinstance(writer.sent[-1], ReleaseTask) and writer.sent[-1].principal == "sue"
    assert writer.tasks["run-1/0/1"].claim_note == body["claim_note"]
    # Open again, the task is not hers to see (not her role).
    assert "run-1/0/1" not in _ids(client, "sue")


def test_a_deeply_nested_result_is_422_on_the_api_and_the_page(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    writer.open(
        "run-ops/0/1/operator",
        kind=TaskKind.OPERATOR,
        role="operator",
        answer_json='{"effect": "tool://billing/charge", "request": {"args": {}}}',
    )
    url = "/api/tasks/run-ops/0/1/operator/decide"
    deep = "[" * 5_000 + "]" * 5_000
    body = '{"decision": "happened", "result": ' + deep + "}"
    r = client.post(url, headers={**auth("olga"), "Content-Type": "application/json"}, content=body)
    assert 400 <= r.status_code < 500, r.text
    client.post("/signin", data={"token": "olga-token"})
    page = client.post(
        "/tasks/run-ops%2F0%2F1%2Foperator/decide",
        data={"decision": "happened", "result": "[" * 10_000 + "]" * 10_000},
    )
    assert page.status_code == 200 and "must be JSON" in page.text  # flash, not a 500
    assert writer.sent == []


def test_lists_page_with_a_cursor(client: httpx.Client, writer: MemoryWriter) -> None:
    for i in range(5):
        writer.open(f"run-p{i}/0/1", opened_ms=NOW - 50_000 + i)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = client.get("/api/tasks", headers=auth("ada"), params=params).json()
        seen += [t["task_id"] for t in r["tasks"]]
        cursor = r["cursor"]
        if cursor is None:
            break
    assert seen == ["run-1/0/1", *(f"run-p{i}/0/1" for i in range(5))]
    bad = client.get("/api/tasks", headers=auth("ada"), params={"cursor": "nope"})
    assert bad.status_code == 422 and "cursor" in bad.json()["detail"]


def test_the_cli_reads_its_token_from_the_environment_and_pages(
    client: httpx.Client, writer: MemoryWriter
) -> None:
    for i in range(3):
        writer.open(f"run-c{i}/0/1", opened_ms=NOW - 50_000 + i)
    runner = CliRunner()
    url = str(client.base_url)
    env = {"RUNPLANE_WORKLIST_TOKEN": "ada-token"}
    first = runner.invoke(tasks_app, ["list", "--url", url, "--limit", "2"], env=env)
    assert first.exit_code == 0, first.output
    assert "run-1/0/1" in first.output and "run-c0/0/1" in first.output
    cursor = first.output.split("--cursor ", 1)[1].split()[0]
    rest = runner.invoke(tasks_app, ["list", "--url", url, "--cursor", cursor], env=env)
    assert rest.exit_code == 0, rest.output
    assert "run-c1/0/1" in rest.output and "run-c2/0/1" in rest.output
    assert "run-1/0/1" not in rest.output and "--cursor" not in rest.output
    none = runner.invoke(tasks_app, ["list", "--url", url], env={"RUNPLANE_WORKLIST_TOKEN": ""})
    assert none.exit_code == 1 and "RUNPLANE_WORKLIST_TOKEN" in none.output
