"""A stock executor process (``python -m services.executor``) for tests that kill one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from runplane.config import Settings

ROOT = Path(__file__).resolve().parents[2]


class ExecutorProcess:
    """One executor on ``settings``' topics, its output in ``logs/executor-<instance>.log``;
    ``env`` adds to (or, with a None value, removes from) the inherited environment."""

    def __init__(
        self,
        settings: Settings,
        instance: str,
        logs: Path,
        env: Mapping[str, str | None],
    ) -> None:
        full = {
            **os.environ,
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_PARTITIONS": str(settings.partitions),
            "RUNPLANE_INSTANCE_ID": f"{settings.instance_id}-{instance}",
            "RUNPLANE_EXECUTOR_PORT": "0",
            "RUNPLANE_LOG_LEVEL": "WARNING",
        }
        for name, value in env.items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        self._log: IO[bytes] = (logs / f"executor-{instance}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.executor"],
            cwd=ROOT,
            env=full,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
