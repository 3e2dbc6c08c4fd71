"""The demo, step by step: stack → topics → fakes → services → runs → approval → journals.

The bring-up (stack, topics, principals, fakes, services) is ``_setup.py``'s; this module
emits the runs, follows them, approves the refund and verifies every journal.

Each step either succeeds or raises :class:`DemoError` naming the step, the reason and the tail
of the relevant log, so ``runplane demo`` can exit non-zero with something a person can act
on. What the demo starts in the background (the fakes, ``runplane serve all``) is recorded
under the state dir by :mod:`runplane.stack` and stays up after the demo; ``runplane down``
stops it with the stack.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx

from runplane.config import Settings
from runplane.demo._plan import (
    APPROVER,
    INITIATOR,
    TERMINAL,
    DemoOutcome,
    DemoRequest,
    RunResult,
    demo_requests,
    status_changes,
)
from runplane.demo._setup import (
    DemoConfig,
    DemoError,
    Emitter,
    Reporter,
    _fail_with_log,
    bring_up_stack,
    ensure_principals,
    start_fakes,
    start_services,
)
from runplane.demo._support import support_verdict
from runplane.errors import RunplaneError
from runplane.runs.client import Client
from runplane.runs.read import read_run, verify_exit_code
from runplane.stack.process import is_alive


def default_emitter(settings: Settings) -> Emitter:
    client: Emitter = Client(settings)
    return client


def emit(
    config: DemoConfig, emitter: Emitter, requests: tuple[DemoRequest, ...], reporter: Reporter
) -> list[RunResult]:
    results = []
    for req in requests:
        try:
            reply = emitter.admit(
                req.capability,
                req.key,
                dict(req.input),
                correlation=dict(req.correlation),
                initiator=INITIATOR,
                timeout=30.0,
            )
        except RunplaneError as exc:
            # Admission answers from inside `serve all`: its log says why no reply came.
            raise _fail_with_log(
                config, "emit", "services", f"{req.capability} ({req.key}): {exc}"
            ) from None
        outcome = str(getattr(reply.outcome, "value", reply.outcome))
        status = None if reply.status is None else str(getattr(reply.status, "value", reply.status))
        if reply.run_id is None:
            results.append(
                RunResult(req.capability, req.key, None, outcome, None, detail=reply.reason or "")
            )
            reporter.note(f"{req.capability}: {outcome} — {reply.reason or 'no run'}")
            continue
        # A duplicate is shown as what it is: the key already had a run; we follow that one.
        what = "admitted as" if outcome == "ADMITTED" else f"{outcome.lower()} of"
        reporter.note(f"{req.capability}: key {req.key} {what} run {reply.run_id}")
        results.append(
            RunResult(req.capability, req.key, reply.run_id, outcome, status, injected=req.injected)
        )
    return results


class RunWatcher:
    """Follows run statuses through the journal service's API (``GET /runs/{id}``)."""

    def __init__(
        self,
        config: DemoConfig,
        client: httpx.Client,
        reporter: Reporter,
        services_pid: int,
        token: str = "",
    ) -> None:
        self._config = config
        # The journal API answers principals only (any role): the demo asks as its approver.
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._services_pid = services_pid
        self._client = client
        self._reporter = reporter
        self._seen: dict[str, str | None] = {}
        self.capability: dict[str, str] = {}

    def status(self, run_id: str) -> str | None:
        try:
            resp = self._client.get(
                self._config.ports.url("journal", f"/runs/{run_id}"),
                headers=self._headers,
                timeout=10,
            )
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        value = resp.json().get("status")
        return None if value is None else str(value)

    def poll(self, run_ids: list[str]) -> dict[str, str | None]:
        now = {r: self.status(r) for r in run_ids}
        for run, old, new in status_changes(self._seen, now):
            if new is not None or old is not None:
                self._reporter.run_status(self.capability.get(run, "?"), run, old, new)
        self._seen.update(now)
        return now

    def wait(
        self, run_ids: list[str], until: Callable[[dict[str, str | None]], bool], timeout_s: float
    ) -> dict[str, str | None]:
        deadline = time.monotonic() + timeout_s
        while True:
            now = self.poll(run_ids)
            if until(now):
                return now
            if not is_alive(self._services_pid):
                # No point waiting out the timeout: nothing will move these runs now.
                raise _fail_with_log(
                    self._config, "runs", "services", "`runplane serve all` exited"
                )
            if time.monotonic() > deadline:
                return now
            time.sleep(0.5)


def find_task(
    config: DemoConfig, client: httpx.Client, token: str, run_id: str
) -> dict[str, Any] | None:
    resp = client.get(
        config.ports.url("worklist", "/api/tasks"),
        params={"status": "OPEN"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    if resp.status_code != 200:
        raise DemoError("approve", f"worklist answered {resp.status_code}: {resp.text[:300]}")
    for task in resp.json().get("tasks", []):
        if task.get("session_id") == run_id:
            return dict(task)
    return None


def approve(
    config: DemoConfig, client: httpx.Client, token: str, run_id: str, reporter: Reporter
) -> None:
    """Approve the run's open task through the worklist API, as the demo principal."""
    deadline = time.monotonic() + 30
    task = find_task(config, client, token, run_id)
    while task is None:
        if time.monotonic() > deadline:
            raise DemoError("approve", f"no open task for run {run_id} on the worklist")
        time.sleep(0.5)
        task = find_task(config, client, token, run_id)
    task_id = str(task["task_id"])
    reporter.note(
        f"worklist: task {task_id} asks {task.get('question')!r} (role {task.get('role')})"
    )
    resp = client.post(
        config.ports.url("worklist", f"/api/tasks/{task_id}/decide"),
        json={"decision": "approve", "comment": "approved by the runplane demo"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    if resp.status_code != 200:
        raise DemoError("approve", f"decide answered {resp.status_code}: {resp.text[:300]}")
    reporter.note(f"worklist: {APPROVER} approved {task_id} through the API")


def verify_runs(
    config: DemoConfig,
    results: list[RunResult],
    statuses: Mapping[str, str | None],
    reporter: Reporter,
) -> DemoOutcome:
    final = []
    for r in results:
        if r.run_id is None:
            final.append(r)
            continue
        history = read_run(config.settings, r.run_id, bodies=True)
        code, data = verify_exit_code(history)
        reporter.journal(r.capability, history, data, code)
        detail = "" if code == 0 else str(data.get("reason") or data.get("body_absent"))
        behaved = True
        if r.injected is not None:
            verdict = support_verdict(history.records)
            behaved = verdict.expected(r.injected)
            case = "injected e-mail" if r.injected else "honest e-mail"
            reporter.note(f"support ({case}) {r.run_id}: {verdict.describe()}")
            if not behaved:
                want = "1 performed, the injected one refused" if r.injected else "1, none refused"
                detail = detail or f"expected {want}; the journal shows {verdict.describe()}"
        final.append(
            dataclasses.replace(
                r,
                status=statuses.get(r.run_id) or r.status,
                verified=code == 0,
                records=int(data["records"]),
                detail=detail,
                behaved=behaved,
            )
        )
    return DemoOutcome(tuple(final))


# -- the whole demo ---------------------------------------------------------------------------


Statuses = dict[str, str | None]


def _reached(run_id: str, wanted: set[str]) -> Callable[[Statuses], bool]:
    return lambda s: s.get(run_id) in wanted


def _left(run_id: str, status: str) -> Callable[[Statuses], bool]:
    return lambda s: s.get(run_id) not in (None, status)


@contextlib.contextmanager
def _http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def run_demo(
    config: DemoConfig, reporter: Reporter, *, emitter: Emitter | None = None
) -> DemoOutcome:
    """Everything ``runplane demo`` does; returns how each example run ended.

    Raises :class:`DemoError` when a step fails. The services and fakes stay up afterwards.
    """
    bring_up_stack(config, reporter)
    principals_file, found = ensure_principals(config)
    principals = {p.name: p for p in found}
    reporter.note(f"principals: {principals_file} ({', '.join(principals)})")
    start_fakes(config, reporter)
    services_pid = start_services(config, principals_file, reporter)
    requests = demo_requests(config.nonce)
    if emitter is not None:
        results = emit(config, emitter, requests, reporter)
    else:
        own = default_emitter(config.settings)
        try:
            results = emit(config, own, requests, reporter)
        finally:
            close = getattr(own, "close", None)
            if callable(close):
                close()
    run_ids = [r.run_id for r in results if r.run_id is not None]
    approver = principals[APPROVER]
    with _http() as client:
        watcher = RunWatcher(config, client, reporter, services_pid, approver.token)
        watcher.capability = {r.run_id: r.capability for r in results if r.run_id is not None}
        waiting = {
            r.run_id
            for r, req in zip(results, requests, strict=True)
            if r.run_id is not None and req.needs_approval
        }
        for run_id in sorted(waiting):
            now = watcher.wait(
                run_ids, _reached(run_id, {"AWAITING_HUMAN", *TERMINAL}), config.run_timeout_s
            )
            if now.get(run_id) != "AWAITING_HUMAN":
                continue  # already decided (a duplicate of an earlier demo run) or ended
            reporter.note(
                f"refund {run_id} waits for a person: open {config.worklist_page} and sign in "
                f"with the token {approver.token} ({APPROVER}, role finance)"
            )
            if config.manual:
                reporter.note("--manual: approve it on the page; the demo waits for your decision")
                watcher.wait(run_ids, _left(run_id, "AWAITING_HUMAN"), config.manual_timeout_s)
            else:
                approve(config, client, approver.token, run_id, reporter)
        with reporter.progress("waiting for every run to complete") as update:

            def done(s: dict[str, str | None]) -> bool:
                update("; ".join(f"{watcher.capability[r]} {s.get(r) or '…'}" for r in run_ids))
                return all(s.get(r) in TERMINAL for r in run_ids)

            statuses = watcher.wait(run_ids, done, config.run_timeout_s)
    if not all(statuses.get(r) in TERMINAL for r in run_ids):
        pending = ", ".join(
            f"{watcher.capability[r]} {r} is {statuses.get(r)}"
            for r in run_ids
            if statuses.get(r) not in TERMINAL
        )
        raise _fail_with_log(
            config, "runs", "services", f"not finished after {config.run_timeout_s:.0f}s: {pending}"
        )
    return verify_runs(config, results, statuses, reporter)
