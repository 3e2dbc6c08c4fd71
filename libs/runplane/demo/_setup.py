"""The demo's bring-up: stack → topics → principals → fakes → ``runplane serve all``, and the
configuration and protocols every step shares.

Each step either succeeds or raises :class:`DemoError` naming the step, the reason and the tail
of the relevant log. What it starts in the background (the fakes, ``runplane serve all``) is
recorded under the state dir by :mod:`runplane.stack` and stays up after the demo;
``runplane down`` stops it with the stack. The runs themselves are ``_flow.py``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runplane.config import SERVICE_PORTS, Settings
from runplane.demo._plan import (
    PUBLISHED_TOKENS,
    DemoPorts,
    DemoPrincipal,
    demo_principals,
    platform_env,
    principals_yaml,
    published_principals,
)
from runplane.errors import ConfigError, RunplaneError
from runplane.kafka.clients import admin
from runplane.kafka.topics import create_topics
from runplane.runs.read import RunHistory
from runplane.serving.auth import Principals
from runplane.stack import StackConfig, StackError, up
from runplane.stack.platform import PlatformProcess, healthy, log_file, owned, start
from runplane.stack.platform import stop as stop_platform
from runplane.stack.process import (
    cmdline,
    describe_port_owner,
    is_alive,
    port_bindable,
    port_open,
    tail,
)

SUPPORT_MODEL_SERVER = "runplane.demo._model_server"  # ``python -m`` it: the demo's model fake


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
    """What the demo needs of ``runplane.runs.client.Client``."""

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
    # Served beside the examples (`runplane demo --agents … --tools …`): module names, and
    # tools config files (absolute paths).
    agent_modules: tuple[str, ...] = ()
    tools_configs: tuple[str, ...] = ()

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
    module: tuple[str, ...]
    if which == "billing":
        module = ("runplane.fakes", which)
        extra = ["--counts", str(config.demo_dir / "billing-counts.json")]
    else:
        # The model provider: the OpenAI-compatible fake answering from the demo's own model
        # function (``_support``: the support conversation scripted, echo for the rest).
        module, extra = (SUPPORT_MODEL_SERVER,), []
    argv = [config.python, "-m", *module, "--port", str(port), *extra]
    # The demo's own import path, so the fake runs the code the demo runs (a checkout on
    # PYTHONPATH ahead of an installed runplane); nothing else of the demo's environment.
    path = os.environ.get("PYTHONPATH")
    return PlatformProcess(
        name=which,
        argv=tuple(argv),
        markers=(*module, "--port", str(port)),
        address=f"127.0.0.1:{port}",
        env={} if path is None else {"PYTHONPATH": path},
    )


def _services(config: DemoConfig, principals_file: Path) -> PlatformProcess:
    env = platform_env(
        config.settings,
        config.ports,
        principals_file=principals_file,
        calendars_file=config.calendars_file,
        base=os.environ,
        agent_modules=config.agent_modules,
        tools_configs=config.tools_configs,
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
        pid = owned(config.stack, which)
        if pid is not None and not all(m in cmdline(pid) for m in proc.markers):
            # Started by another version of the demo (the plain fake): not what we serve now.
            reporter.note(f"{which} fake: running as another program; restarting it")
            stop_platform(config.stack, which)
            pid = None
        if pid is not None and port_open("127.0.0.1", port):
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
