"""The stock executor as its own process: ``python -m services.executor`` (what
``runplane serve executor`` runs), configured by environment variables only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from runplane.config import Settings

ROOT = Path(__file__).resolve().parents[2]


class StockExecutor:
    """``python -m services.executor`` with nothing but environment variables."""

    def __init__(self, settings: Settings, env: dict[str, str], log: Path) -> None:
        self._log: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.executor"],
            cwd=ROOT,
            env={
                **os.environ,
                "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
                "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
                "RUNPLANE_PARTITIONS": str(settings.partitions),
                "RUNPLANE_INSTANCE_ID": settings.instance_id,
                "RUNPLANE_EXECUTOR_PORT": "0",
                "RUNPLANE_LOG_LEVEL": "INFO",
                **env,
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush — a crash."""
        self.proc.kill()
        self.proc.wait(30)
        self._log.close()

    def log_tail(self, chars: int = 3000) -> str:
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
