"""``up`` / ``down`` / ``status`` of the local stack: Kafka (KRaft) and Redis as background processes.

Every operation is idempotent and serialised by a lock file in the state dir, so two shells (or
two test sessions) running ``up`` at once start one stack. A component already answering on
its port but not started from this state dir is reported as ``external`` and left alone: it is
reused by ``up`` and never stopped by ``down``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import functools
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from runplane.stack import _cluster, _kafka, _redis, platform
from runplane.stack._config import StackConfig
from runplane.stack._errors import StackError, StackStartTimeout
from runplane.stack._warm import after_start
from runplane.stack.process import (
    describe_port_owner,
    is_alive,
    log_size,
    owned_pid,
    port_bindable,
    spawn,
    terminate,
)

Progress = Callable[[str], None]
State = Literal["running", "external", "unhealthy", "blocked", "stopped"]

KAFKA = "kafka"
REDIS = "redis"
_GRACE = {KAFKA: 30.0, REDIS: 10.0}


def _node(config: StackConfig, name: str) -> _cluster.Node | None:
    """The cluster node called ``name`` (``kafka-2``), None for the single node and Redis."""
    return next((n for n in _cluster.nodes(config) if n.name == name), None)


def kafka_names(config: StackConfig) -> tuple[str, ...]:
    """The Kafka components: ``kafka`` for the single node, ``kafka-1`` … for a cluster."""
    if _cluster.size(config) == 1:
        return (KAFKA,)
    return tuple(n.name for n in _cluster.nodes(config))


@dataclass(frozen=True)
class ComponentStatus:
    """One component of the stack as seen now, and what the last operation did to it."""

    name: str
    state: State
    address: str
    pid: int | None = None
    detail: str = ""
    action: str = ""
    # Kafka and Redis are required; platform processes (``runplane serve all``, the fakes)
    # are shown and stopped, but their absence does not make the stack "not ready".
    required: bool = True

    @property
    def ready(self) -> bool:
        return self.state in ("running", "external")


@dataclass(frozen=True)
class StackReport:
    """What ``up``, ``down`` or ``status`` found (and did), component by component."""

    components: tuple[ComponentStatus, ...]
    elapsed: float = 0.0

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.components if c.required)

    def component(self, name: str) -> ComponentStatus:
        return next(c for c in self.components if c.name == name)


def _pid_file(config: StackConfig, name: str) -> Path:
    return config.run_dir / f"{name}.pid"


def _markers(config: StackConfig, name: str) -> tuple[str, ...]:
    node = _node(config, name)
    if node is not None:
        return _cluster.markers(node)
    return _kafka.kafka_markers(config) if name == KAFKA else _redis.redis_markers(config)


def _address(config: StackConfig, name: str) -> str:
    node = _node(config, name)
    if node is not None:
        return node.address
    return config.bootstrap if name == KAFKA else f"{config.redis_host}:{config.redis_port}"


def _answers(config: StackConfig, name: str) -> int | None:
    if name == REDIS:
        return _redis.redis_answers(config.redis_url)
    return _kafka.kafka_answers(_address(config, name), timeout=3.0)


def _detail(name: str, count: int) -> str:
    return f"{count} keys" if name == REDIS else f"{count} topics"


@contextlib.contextmanager
def _locked(config: StackConfig) -> Iterator[None]:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "stack.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- status ------------------------------------------------------------------------------------


def _observe(config: StackConfig, name: str, action: str = "") -> ComponentStatus:
    address = _address(config, name)
    pid = owned_pid(_pid_file(config, name), _markers(config, name))
    count = _answers(config, name)
    if pid is not None:
        state: State = "running" if count is not None else "unhealthy"
        detail = _detail(name, count) if count is not None else "process up, not answering"
        return ComponentStatus(name, state, address, pid, detail, action)
    if count is not None:
        return ComponentStatus(name, "external", address, None, _detail(name, count), action)
    host, _, port = address.rpartition(":")
    if not port_bindable(host, int(port)):
        return ComponentStatus(
            name, "blocked", address, None, describe_port_owner(int(port)), action
        )
    return ComponentStatus(name, "stopped", address, None, "", action)


def _platform_status(config: StackConfig) -> tuple[ComponentStatus, ...]:
    return tuple(
        ComponentStatus(o.name, o.state, o.address, o.pid, o.detail, required=False)
        for o in platform.observe(config)
    )


def status(config: StackConfig) -> StackReport:
    """The state of Kafka and Redis now, and of any platform process started from this state
    dir (no side effects beyond clearing stale pid files)."""
    started = time.monotonic()
    kafka = tuple(_observe(config, name) for name in kafka_names(config))
    components = (*kafka, _observe(config, REDIS), *_platform_status(config))
    return StackReport(components, time.monotonic() - started)


# -- up ----------------------------------------------------------------------------------------


def _start_redis(config: StackConfig) -> None:
    binary = _redis.redis_binary(config)
    _redis.render_config(config)
    pid_file = _pid_file(config, REDIS)
    started = time.monotonic()
    log_path = config.logs_dir / "redis.log"
    mark = log_size(log_path)
    pid = spawn(_redis.redis_argv(config, binary), log_path=log_path, pid_file=pid_file)
    _redis.wait_redis(config, lambda: is_alive(pid), started, since=mark)


def _start_kafka(config: StackConfig, progress: Progress | None) -> None:
    java = _kafka.java_binary(config)
    _kafka.resolve_jars(config, progress)
    _kafka.render_properties(config)
    _kafka.format_storage(config, java, progress)
    try:
        _spawn_kafka(config, java, progress)
    except StackStartTimeout:
        # A loaded machine can starve a first start (measured: one retry is enough).
        if progress:
            progress("Kafka was slow to answer; retrying once")
        _spawn_kafka(config, java, progress)


def _spawn_kafka(config: StackConfig, java: str, progress: Progress | None) -> None:
    if progress:
        progress(f"starting Kafka on {config.bootstrap}")
    started = time.monotonic()
    marks = _kafka.log_marks(config)
    pid = spawn(
        _kafka.server_argv(config, java),
        log_path=config.logs_dir / "kafka.out",
        pid_file=_pid_file(config, KAFKA),
    )
    try:
        _kafka.wait_kafka(config, lambda: is_alive(pid), progress, started, marks=marks)
    except StackError:
        terminate(pid, grace=10.0)  # never leave a half-started broker behind
        _pid_file(config, KAFKA).unlink(missing_ok=True)
        raise


def _bring_up(config: StackConfig, name: str, progress: Progress | None) -> ComponentStatus:
    seen = _observe(config, name)
    if seen.state in ("running", "external"):
        verb = "already running" if seen.state == "running" else "reusing what answers there"
        return ComponentStatus(name, seen.state, seen.address, seen.pid, seen.detail, verb)
    if seen.state == "blocked":
        raise StackError(f"cannot start {name} on {seen.address}: {seen.detail}")
    if seen.state == "unhealthy" and seen.pid is not None:
        # Our process is up but silent (still starting, or wedged): give it the start timeout.
        alive_pid = seen.pid
        if name == KAFKA:
            _kafka.wait_kafka(config, lambda: is_alive(alive_pid), progress, time.monotonic())
        else:
            _redis.wait_redis(config, lambda: is_alive(alive_pid), time.monotonic())
        return _observe(config, name, "was starting; now answers")
    started = time.monotonic()
    if name == KAFKA:
        _start_kafka(config, progress)
    else:
        _start_redis(config)
    return _observe(config, name, f"started in {time.monotonic() - started:.1f}s")


def up(config: StackConfig, *, progress: Progress | None = None) -> StackReport:
    """Start Kafka and Redis in the background unless they already answer; wait until ready.

    Raises :class:`StackError` with the reason (port taken, java missing, jars unresolved…) and
    the tail of the component's log.
    """
    if not config.is_local:
        raise StackError(
            f"runplane up starts a local stack only; settings point at {config.bootstrap} "
            f"and {config.redis_url}"
        )
    started = time.monotonic()
    with _locked(config):
        if progress:
            progress("starting Redis")
        redis_status = _bring_up(config, REDIS, progress)
        if _cluster.size(config) == 1:
            kafka_status = _bring_up(config, KAFKA, progress)
            # A broker it has just started is warmed before `up` returns (_warm.py says why).
            warmed = after_start(config.bootstrap, kafka_status.action, progress)
            kafka: tuple[ComponentStatus, ...] = (replace(kafka_status, action=warmed),)
        else:
            kafka = _bring_up_cluster(config, progress)
    return StackReport((*kafka, redis_status), time.monotonic() - started)


def _bring_up_cluster(
    config: StackConfig, progress: Progress | None
) -> tuple[ComponentStatus, ...]:
    """Start every node that is not running, *then* wait for each: a node cannot answer
    before a majority of the controller quorum is up, so waiting node by node would hang."""
    java = _kafka.java_binary(config)
    _kafka.resolve_jars(config, progress)
    _cluster.format_storage(config, java, progress)
    started = time.monotonic()
    spawned: dict[str, tuple[int, dict[str, int]]] = {}
    for node in _cluster.nodes(config):
        seen = _observe(config, node.name)
        if seen.state == "blocked":
            raise StackError(f"cannot start {node.name} on {seen.address}: {seen.detail}")
        if seen.state != "stopped":
            continue
        _cluster.render(config, node)
        if progress:
            progress(f"starting {node.name} on {node.address}")
        marks = _kafka.log_marks(config, node.logs)
        pid = spawn(
            _cluster.jvm(config, java, node),
            log_path=node.logs / "kafka.out",
            pid_file=_pid_file(config, node.name),
        )
        spawned[node.name] = (pid, marks)
    for node in _cluster.nodes(config):
        owner = owned_pid(_pid_file(config, node.name), _cluster.markers(node))
        if owner is None:
            continue  # external: answered already
        marks = spawned.get(node.name, (owner, {}))[1]
        _kafka.wait_kafka(
            config,
            functools.partial(is_alive, owner),
            progress,
            started,
            marks=marks,
            address=node.address,
            logs=node.logs,
        )
    took = f"started in {time.monotonic() - started:.1f}s"
    return tuple(
        _observe(config, n.name, took if n.name in spawned else "already running")
        for n in _cluster.nodes(config)
    )


# -- down --------------------------------------------------------------------------------------


def _stop(config: StackConfig, name: str, progress: Progress | None) -> ComponentStatus:
    pid_file = _pid_file(config, name)
    pid = owned_pid(pid_file, _markers(config, name))
    address = _address(config, name)
    if pid is None:
        seen = _observe(config, name)
        action = "not ours, left running" if seen.state == "external" else "was not running"
        return ComponentStatus(name, seen.state, address, None, seen.detail, action)
    if progress:
        progress(f"stopping {name} (pid {pid})")
    started = time.monotonic()
    killed = terminate(pid, grace=_GRACE[REDIS if name == REDIS else KAFKA])
    pid_file.unlink(missing_ok=True)
    how = "killed after SIGTERM timed out" if killed else "stopped"
    return ComponentStatus(
        name, "stopped", address, None, "", f"{how} in {time.monotonic() - started:.1f}s"
    )


def _stop_platform(config: StackConfig, progress: Progress | None) -> tuple[ComponentStatus, ...]:
    out: list[ComponentStatus] = []
    for name in platform.recorded_names(config):
        began = time.monotonic()
        if progress and platform.owned(config, name) is not None:
            progress(f"stopping {name}")
        address, pid, killed = platform.stop(config, name)
        if pid is None:
            continue  # recorded but already gone: nothing to report
        how = "killed after SIGTERM timed out" if killed else "stopped"
        action = f"{how} in {time.monotonic() - began:.1f}s"
        out.append(ComponentStatus(name, "stopped", address, None, "", action, required=False))
    return tuple(out)


def down(
    config: StackConfig, *, wipe: bool = False, progress: Progress | None = None
) -> StackReport:
    """Stop what ``up`` (and ``runplane demo``) started (SIGTERM, then SIGKILL), leaving no
    process behind.

    ``wipe`` also deletes Kafka's and Redis's data, so the next ``up`` formats fresh storage.
    """
    started = time.monotonic()
    with _locked(config):
        # Platform processes first: they commit or abort their transactions on SIGTERM, which
        # needs the broker still up.
        platform = _stop_platform(config, progress)
        # A cluster's nodes stop together: stopped one by one, the last would wait for a
        # controller quorum that is already gone (its controlled shutdown never completes).
        names = kafka_names(config)
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
            kafka = tuple(pool.map(lambda n: _stop(config, n, progress), names))
        redis_status = _stop(config, REDIS, progress)
        if wipe:
            shutil.rmtree(config.kafka_dir, ignore_errors=True)
            shutil.rmtree(config.redis_dir, ignore_errors=True)
            shutil.rmtree(config.logs_dir, ignore_errors=True)
    return StackReport((*kafka, redis_status, *platform), time.monotonic() - started)
