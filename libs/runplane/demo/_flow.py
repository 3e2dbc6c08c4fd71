"""The demo, step by step: stack → topics → fakes → services → runs → approval → journals.

Each step either succeeds or raises :class:`DemoError` naming the step, the reason and the tail
of the relevant log, so ``runplane demo`` can exit non-zero with something a person can act
on. What the demo starts in the background (the fakes, ``runplane serve all``) is recorded
under the state dir by :mod:`runplane.stack` and stays up after the demo; ``runplane down``
stops it with the stack.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from runplane.auth import Principals
from runplane.config import SERVICE_PORTS, Settings
from runplane.demo._plan import (
    APPROVER,
    INITIATOR,
    PUBLISHED_TOKENS,
    TERMINAL,
    DemoOutcome,
    DemoPorts,
    DemoPrincipal,
    DemoRequest,
    RunResult,
    demo_principals,
    demo_requests,
    platform_env,
    principals_yaml,
    published_principals,
    status_changes,
)
from runplane.errors import ConfigError, RunplaneError
from runplane.runs import RunHistory, read_run
from runplane.stack import StackConfig, StackError, up
from runplane.stack._platform import PlatformProcess, healthy, log_file, owned, start
from runplane.stack._platform import stop as stop_platform
from runplane.stack._process import describe_port_owner, is_alive, port_bindable, port_open, tail


class DemoError(RunplaneError):
    """A demo step failed: ``step`` names it, ``log_tail`` is what the relevant log said."""

    def __init__(
        self, step: str, message: str, *, log_tail: str = "", log_path: Path | None = None
    ) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.log_tail = log_tail
        self.log_path = log_path


Update = Callable[[str], None]


class Reporter(Protocol):
    """What the demo tells the person running it (rich in the CLI, a list in tests)."""

    def progress(self, title: str) -> contextlib.AbstractContextManager[Update]: ...
    def note(self, text: str) -> None: ...
    def run_status(
        self, capability: str, run_id: str, old: str | None, new: str | None
    ) -> None: ...
    def journal(
        self, capability: str, history: RunHistory, verdict: Mapping[str, Any], code: int
    ) -> None: ...


class Reply(Protocol):
    """The parts of an AdmissionReply the demo reads."""

    @property
    def outcome(self) -> Any: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def status(self) -> Any: ...
    @property
    def reason(self) -> str | None: ...


class Emitter(Protocol):
    """What the demo needs of ``runplane.client.Client``."""

    def admit(
        self,
        capability: str,
        key: str,
        input: Any,
        *,
        correlation: Mapping[str, str] | None = None,
        initiator: str | None = None,
        timeout: float = 30.0,
    ) -> Reply: ...


@dataclass(frozen=True)
class DemoConfig:
    """One invocation of the demo. ``settings.state_dir`` must be absolute."""

    settings: Settings
    ports: DemoPorts = field(default_factory=DemoPorts)
    manual: bool = False
    nonce: str = field(default_factory=lambda: secrets.token_hex(4))
    python: str = sys.executable
    health_timeout_s: float = 150.0
    run_timeout_s: float = 150.0
    manual_timeout_s: float = 1800.0
    calendars_file: Path | None = None
    examples_principals: Path | None = None

    def __post_init__(self) -> None:
        if not self.settings.state_dir.is_absolute():
            raise ConfigError("the demo needs an absolute state dir")

    @property
    def stack(self) -> StackConfig:
        return StackConfig.from_settings(self.settings)

    @property
    def demo_dir(self) -> Path:
        return self.settings.state_dir / "demo"

    @property
    def principals_file(self) -> Path:
        return self.demo_dir / "principals.yaml"

    @property
    def tokens_file(self) -> Path:
        return self.demo_dir / "tokens.json"

    @property
    def worklist_page(self) -> str:
        return self.ports.url("worklist", "/")


def _examples_file(*parts: str) -> Path | None:
    try:
        import examples
    except ImportError:
        return None
    path = Path(examples.__file__).resolve().parent.joinpath(*parts)
    return path if path.is_file() else None


def default_calendars_file() -> Path | None:
    """``examples/calendars/calendars.yaml`` of this checkout, when it is there."""
    return _examples_file("calendars", "calendars.yaml")


def default_principals_file() -> Path | None:
    """``examples/principals.yaml`` of this checkout, when it is there."""
    return _examples_file("principals.yaml")


# -- steps ------------------------------------------------------------------------------------


def bring_up_stack(config: DemoConfig, reporter: Reporter) -> None:
    from runplane.kafka.clients import admin
    from runplane.kafka.topics import create_topics

    with reporter.progress(
        "starting Kafka and Redis (first time: resolving the Kafka jars)"
    ) as update:
        try:
            report = up(config.stack, progress=update)
        except StackError as exc:
            raise DemoError("stack", str(exc)) from None
    reporter.note(
        "stack: "
        + ", ".join(f"{c.name} {c.state} ({c.action or c.detail})" for c in report.components)
    )
    with reporter.progress("creating topics") as update:
        update(f"creating topics {config.settings.topic_prefix}*")
        try:
            created = create_topics(config.settings, admin(config.settings))
        except Exception as exc:  # confluent-kafka raises KafkaException or its own errors
            raise DemoError("topics", f"could not create topics: {exc}") from None
    reporter.note(f"topics: {len(created)} created under {config.settings.topic_prefix}*")


def ensure_principals(config: DemoConfig) -> tuple[Path, tuple[DemoPrincipal, ...]]:
    """The principals file the services get, and the demo principals in it.

    ``examples/principals.yaml`` when its published tokens still match (the README documents
    them); otherwise a file of our own under the state dir, with tokens made once per state
    dir and kept (mode 600) in ``demo/tokens.json``.
    """
    config.demo_dir.mkdir(parents=True, exist_ok=True)
    if config.examples_principals is not None and config.examples_principals.is_file():
        with contextlib.suppress(ConfigError, OSError, ValueError):
            found = published_principals(Principals.from_file(config.examples_principals))
            if found is not None:
                _write_tokens(config, {p.name: p.token for p in found})
                return config.examples_principals, found
    tokens: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(config.tokens_file.read_text())
        if isinstance(loaded, dict):
            tokens = {
                str(k): str(v)
                for k, v in loaded.items()
                if k not in PUBLISHED_TOKENS or v != PUBLISHED_TOKENS[k]
            }
    for name in ("ada", "grace"):
        tokens.setdefault(name, secrets.token_urlsafe(18))
    _write_tokens(config, tokens)
    principals = demo_principals(tokens)
    config.principals_file.write_text(principals_yaml(principals))
    return config.principals_file, principals


def _write_tokens(config: DemoConfig, tokens: Mapping[str, str]) -> None:
    fd = os.open(config.tokens_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(tokens), f, indent=2)


def _fake(config: DemoConfig, which: str, port: int) -> PlatformProcess:
    argv = [config.python, "-m", "runplane.fakes", which, "--port", str(port)]
    if which == "billing":
        argv += ["--counts", str(config.demo_dir / "billing-counts.json")]
    return PlatformProcess(
        name=which,
        argv=tuple(argv),
        markers=("runplane.fakes", which, "--port", str(port)),
        address=f"127.0.0.1:{port}",
    )


def _services(config: DemoConfig, principals_file: Path) -> PlatformProcess:
    env = platform_env(
        config.settings,
        config.ports,
        principals_file=principals_file,
        calendars_file=config.calendars_file,
        base=os.environ,
    )
    script = runplane_script(config.python)
    return PlatformProcess(
        name="services",
        argv=(config.python, script, "serve", "all"),
        markers=(script, "serve all"),
        address=f"127.0.0.1:{min(config.ports.services.values())}-{max(config.ports.services.values())}",
        health_urls=config.ports.health_urls(),
        env=env,
    )


def runplane_script(python: str) -> str:
    """The ``runplane`` console script beside ``python`` (the venv's), else the one on PATH."""
    beside = Path(python).with_name("runplane")
    if beside.is_file():
        return str(beside)
    found = shutil.which("runplane")
    if found is None:
        raise DemoError("services", "the runplane console script is not installed (make install)")
    return found


def _fail_with_log(config: DemoConfig, step: str, name: str, message: str) -> DemoError:
    path = log_file(config.stack, name)
    return DemoError(step, message, log_tail=tail(path, 40), log_path=path)


def _ensure_free(config: DemoConfig, step: str, ports: list[int]) -> None:
    for port in ports:
        if not port_bindable("127.0.0.1", port):
            raise DemoError(step, describe_port_owner(port))


def start_fakes(config: DemoConfig, reporter: Reporter) -> None:
    for which, port in (("billing", config.ports.billing), ("openai", config.ports.openai)):
        proc = _fake(config, which, port)
        if owned(config.stack, which) is not None and port_open("127.0.0.1", port):
            reporter.note(f"{which} fake: already running on {proc.address}")
            continue
        _ensure_free(config, "fakes", [port])
        pid = start(config.stack, proc)
        deadline = time.monotonic() + 20
        while not port_open("127.0.0.1", port):
            if not is_alive(pid) or time.monotonic() > deadline:
                raise _fail_with_log(
                    config, "fakes", which, f"the {which} fake did not start on {port}"
                )
            time.sleep(0.1)
        reporter.note(f"{which} fake: started on {proc.address} (pid {pid})")


def _platform_fingerprint(proc: PlatformProcess) -> dict[str, str]:
    """What the services were started with that the demo depends on (RUNPLANE_* only)."""
    return {k: v for k, v in sorted(proc.env.items()) if k.startswith("RUNPLANE_")}


def start_services(config: DemoConfig, principals_file: Path, reporter: Reporter) -> int:
    """Start (or reuse) ``runplane serve all`` and wait for every /healthz; returns its pid.

    A running ``serve all`` is reused only if it was started with the same RUNPLANE_*
    environment (ports, principals, prefix…); otherwise it is restarted, so the demo never
    talks to services configured differently from what it prints.
    """
    proc = _services(config, principals_file)
    fingerprint_file = config.demo_dir / "services-env.json"
    wanted = _platform_fingerprint(proc)
    pid = owned(config.stack, "services")
    if pid is not None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(fingerprint_file.read_text()) == wanted:
                reporter.note(f"services: already running (pid {pid}); waiting for their health")
            else:
                pid = None
        if pid is None:
            reporter.note("services: running with another configuration; restarting them")
            stop_platform(config.stack, "services")
    if pid is None:
        _ensure_free(config, "services", list(config.ports.services.values()))
        fingerprint_file.write_text(json.dumps(wanted, indent=2))
        pid = start(config.stack, proc)
        reporter.note(
            f"services: `runplane serve all` started (pid {pid}), log {log_file(config.stack, 'services')}"
        )
    alive_pid = pid
    with reporter.progress("waiting for the six services' /healthz") as update:
        deadline = time.monotonic() + config.health_timeout_s
        while True:
            states = {name: healthy(config.ports.url(name, "/healthz")) for name in SERVICE_PORTS}
            ready = [n for n, ok in states.items() if ok]
            update(f"healthy: {len(ready)}/6 ({', '.join(ready) or 'none yet'})")
            if all(states.values()):
                break
            if not is_alive(alive_pid):
                raise _fail_with_log(config, "services", "services", "`runplane serve all` exited")
            if time.monotonic() > deadline:
                waiting = ", ".join(n for n, ok in states.items() if not ok)
                raise _fail_with_log(
                    config,
                    "services",
                    "services",
                    f"not healthy after {config.health_timeout_s:.0f}s: {waiting}",
                )
            time.sleep(0.5)
    reporter.note("services: all six answer /healthz")
    return alive_pid


def default_emitter(settings: Settings) -> Emitter:
    try:
        from runplane.client import Client
    except ImportError as exc:
        raise DemoError(
            "emit", f"the emitter client (runplane.client) is not available: {exc}"
        ) from None
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
        results.append(RunResult(req.capability, req.key, reply.run_id, outcome, status))
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
    from runplane.cli.journal import verify_exit_code

    final = []
    for r in results:
        if r.run_id is None:
            final.append(r)
            continue
        history = read_run(config.settings, r.run_id, bodies=True)
        code, data = verify_exit_code(history)
        reporter.journal(r.capability, history, data, code)
        detail = "" if code == 0 else str(data.get("reason") or data.get("body_absent"))
        final.append(
            dataclasses.replace(
                r,
                status=statuses.get(r.run_id) or r.status,
                verified=code == 0,
                records=int(data["records"]),
                detail=detail,
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
