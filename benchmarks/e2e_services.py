"""Admission and the executor for ``benchmarks.e2e``, two ways.

``threads``: both in this process, as ``runplane serve all`` runs them (one interpreter, one
GIL shared with the benchmark's driver and watcher). ``processes``: one stock process per
service (``runplane serve admission`` / ``runplane serve executor`` serving
``benchmarks.e2e_agents``), as the chart and compose deploy them. Both with their default
settings: whatever batching the services do is what is measured.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks import e2e_agents
from runplane.config import Settings
from runplane.core.agents import REGISTRY
from runplane.fakes import free_port
from runplane.providers import TOOLS
from runplane.stack.platform import healthy
from services.admission.decide import CapabilitySpec
from services.admission.serve import build as build_admission
from services.admission.settings import AdmissionSettings
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import executor_thread

MODES = ("threads", "processes")
ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def threads(settings: Settings) -> Iterator[dict[str, int]]:
    """Yields the processes whose CPU a run costs: here one, the services and the driver."""
    caps = {name: CapabilitySpec({"type": "object"}) for name in e2e_agents.CAPABILITIES}
    # Unsigned requests (dev mode): signing is not what this measures.
    processor = build_admission(
        AdmissionSettings(base=settings, allow_unsigned=True), capabilities=caps
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), name="admission", daemon=True)
    thread.start()
    try:
        if not processor.ready.wait(120):
            raise TimeoutError("admission never got its partitions")
        own = ExecutorSettings(base=settings, agent_modules=())
        tools = {"inc": TOOLS["inc"]}
        with executor_thread(own, tools=tools, providers={}, registry=REGISTRY):
            yield {"services and driver": os.getpid()}
    finally:
        stop.set()
        thread.join(60)


@contextlib.contextmanager
def processes(settings: Settings) -> Iterator[dict[str, int]]:
    """The stock services as child processes, measured once both answer ``/readyz``.
    Yields the processes whose CPU a run costs: each service, and the driver (this one)."""
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_AGENT_MODULES": "benchmarks.e2e_agents",
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
        "RUNPLANE_LOG_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("RUNPLANE_TOOLS_CONFIG", None)
    runplane = str(Path(sys.executable).with_name("runplane"))
    procs = []
    pids = {}
    try:
        for name in ("admission", "executor"):
            port = free_port()  # its /readyz, so two benchmark runs never share one
            own = {
                "RUNPLANE_INSTANCE_ID": f"{settings.instance_id}-{name}",
                f"RUNPLANE_{name.upper()}_PORT": str(port),
            }
            proc = subprocess.Popen(
                [runplane, "serve", name], cwd=ROOT, env={**env, **own}, stdin=subprocess.DEVNULL
            )
            procs.append(proc)
            pids[name] = proc.pid
            _await_ready(port, proc)
        yield {**pids, "driver": os.getpid()}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _await_ready(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        if healthy(f"http://127.0.0.1:{port}/readyz"):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{proc.args!r} not ready on port {port} within {timeout_s} s")
