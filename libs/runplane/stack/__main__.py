"""``python -m runplane.stack jars``: resolve the Kafka jars (used by ``make kafka-jars`` and CI)."""

from __future__ import annotations

import sys
import time

from runplane.config import Settings
from runplane.stack._config import StackConfig
from runplane.stack._errors import StackError
from runplane.stack._kafka import jars_resolved, resolve_jars


def main(argv: list[str]) -> int:
    if argv != ["jars"]:
        print("usage: python -m runplane.stack jars", file=sys.stderr)
        return 2
    config = StackConfig.from_settings(Settings.from_env())
    if jars_resolved(config):
        print(f"Kafka jars already resolved in {config.libs_dir}")
        return 0
    last = [0.0]

    def progress(message: str) -> None:  # a log, not a status line: at most one line a second
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            print(message, flush=True)

    try:
        libs = resolve_jars(config, progress=progress)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Kafka jars resolved in {libs} ({sum(1 for _ in libs.glob('*.jar'))} jars)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
