"""Tenants on the worklist: a principal sees and decides only their own tenant's tasks.

Two tenants, each with an approver and a supervisor holding the same roles; a task of one
tenant is invisible to the other's principals (list, show, page) and claiming or deciding it
answers 404, as for a task that does not exist. Tasks from writers older than
``OpenTask.tenant`` belong to the tenant ``default``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest
from test_decision_identity import _start
from test_worklist_api import NOW, MemoryWriter, serve

from runplane.serving.auth import Principal, Principals
from runplane.wire import ClaimTask, DecideTask, ReleaseTask, TaskStatus
from services.worklist.access import Policy, Refusal, visible_to
from services.worklist.decide import decide
from services.worklist.gateway import Sent
from services.worklist.page import task_href
from services.worklist.serve import policy_of
from services.worklist.settings import WorklistSettings

pytestmark = pytest.mark.unit


def principal(name: str, tenant: str, *roles: str) -> Principal:
    digest = hashlib.sha256(f"{name}-token".encode()).hexdigest()
    return Principal(name, digest, frozenset(roles), tenant)


PRINCIPALS = Principals(
    (
        principal("ivan", "acme", "finance"),
        principal("ada", "acme", "finance"),
        principal("sue", "acme", "supervisor", "finance"),
        principal("gil", "globex", "finance"),
        principal("gus", "globex", "supervisor", "finance"),
        principal("dee", "default", "finance"),
    )
)
POLICY = Policy(PRINCIPALS.roles_of, tenant_of=PRINCIPALS.tenant_of)


class TenantWriter(MemoryWriter):
    """The in-memory writer, deciding with the two tenants' policy."""

    def send(self, command: ClaimTask | ReleaseTask | DecideTask) -> Sent:
        self.sent.append(command)
        v = decide(self.tasks.get(command.task_id), command, NOW, POLICY)
        if v.task is not None:
            self.tasks[command.task_id] = v.task
        return Sent(0, len(self.sent))


def _writer() -> TenantWriter:
    w = TenantWriter()
    w.open("run-a/0/1", tenant="acme")
    w.open("run-g/0/1", tenant="globex", initiator="gil")
    w.open("run-old/0/1")  # no tenant: an older executor's task
    return w


def test_visibility_follows_the_tenant_whatever_the_roles() -> None:
    w = _writer()
    a, g, old = w.tasks["run-a/0/1"], w.tasks["run-g/0/1"], w.tasks["run-old/0/1"]
    assert visible_to(a, "ada", POLICY) and not visible_to(a, "gil", POLICY)
    assert not visible_to(a, "gus", POLICY)  # a supervisor of another tenant too
    assert visible_to(g, "gus", POLICY) and not visible_to(g, "sue", POLICY)
    assert visible_to(old, "dee", POLICY) and not visible_to(old, "ada", POLICY)
    assert not visible_to(a, "nobody", POLICY)


def test_another_tenants_task_cannot_be_claimed_or_decided() -> None:
    w = _writer()
    task = w.tasks["run-a/0/1"]
    for command in (
        ClaimTask(task_id="run-a/0/1", principal="gil", at_ms=NOW),
        DecideTask(task_id="run-a/0/1", principal="gus", at_ms=NOW, approve=True),
    ):
        v = decide(task, command, NOW, POLICY)
        assert v.refused is Refusal.NOT_FOUND and v.reason == "no such task"
    v = decide(
        task, DecideTask(task_id="run-a/0/1", principal="ada", at_ms=NOW, approve=True), NOW, POLICY
    )
    assert v.task is not None and v.task.status is TaskStatus.DECIDED


def test_the_services_policy_reads_tenants_from_the_principals() -> None:
    policy = policy_of(WorklistSettings(), PRINCIPALS)
    assert policy.tenant_of("gil") == "globex" and policy.tenant_of("nobody") is None


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    yield from serve(_writer(), POLICY, PRINCIPALS)


def _auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


def _ids(client: httpx.Client, who: str) -> set[str]:
    r = client.get("/api/tasks", headers=_auth(who))
    assert r.status_code == 200, r.text
    return {t["task_id"] for t in r.json()["tasks"]}


def test_the_api_lists_shows_and_decides_only_the_own_tenants_tasks(client: httpx.Client) -> None:
    assert _ids(client, "ada") == {"run-a/0/1"}
    assert _ids(client, "gus") == {"run-g/0/1"}
    assert _ids(client, "dee") == {"run-old/0/1"}
    assert client.get("/api/tasks/run-a/0/1", headers=_auth("gil")).status_code == 404
    r = client.post("/api/tasks/run-a/0/1/claim", headers=_auth("gus"))
    assert r.status_code == 404
    r = client.post(
        "/api/tasks/run-a/0/1/decide", headers=_auth("gil"), json={"decision": "approve"}
    )
    assert r.status_code == 404
    r = client.post(
        "/api/tasks/run-a/0/1/decide", headers=_auth("ada"), json={"decision": "approve"}
    )
    assert r.status_code == 200, r.text


def test_the_page_shows_only_the_own_tenants_tasks(client: httpx.Client) -> None:
    client.cookies.set("runplane_worklist_token", "gil-token")
    home = client.get("/")
    assert home.status_code == 200
    assert task_href("run-g/0/1") in home.text and task_href("run-a/0/1") not in home.text
    assert client.get(task_href("run-a/0/1")).status_code == 404
    assert client.get(task_href("run-g/0/1")).status_code == 200


def test_the_core_opens_a_task_for_its_runs_tenant() -> None:
    _, task = _start(approvals=1)  # a run of tenant acme asks for an approval
    assert task.tenant == "acme"
