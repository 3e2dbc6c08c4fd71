"""Pure handlers load without the Kafka client or the HTTP server: their tests must not pull
confluent-kafka or uvicorn in (issue 12 item 4)."""

from __future__ import annotations

import subprocess
import sys

HANDLERS = (
    "runplane.kafka.handler",
    "services.admission.handler",
    "services.cases.handler",
    "services.worklist.handler",
)


def test_handler_modules_import_no_kafka_or_http_client() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in HANDLERS)
        + "heavy = sorted({m.split('.')[0] for m in sys.modules}"
        + " & {'confluent_kafka', 'uvicorn'})\n"
        + "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"pure handler modules pulled in: {out}"
