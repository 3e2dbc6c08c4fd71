"""A small handler on the shared processor, and a subprocess entry point for the crash tests.

The handler is admission in miniature: a ``claims`` table on ``admission.claims``; a new key
gets a claim and an ADMITTED reply whose run id names the instance that wrote it, a known key
gets DUPLICATE. That makes "outputs, table rows and offsets land together or not at all"
observable from outside with a read_committed reader.

Run as a script (``python test_processor_support.py``) it serves one instance, configured by
environment variables (prefix, instance id, a crash/stall hook before the first commit).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.kafka.processor import Processor, ProcessorConfig, ProcessorStopped
from runplane.serving.shutdown import install_signal_handlers
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    RunStatus,
)


class MiniAdmission:
    tables: Mapping[str, str] = {"claims": "admission.claims"}

    def __init__(self, instance: str) -> None:
        self.instance = instance

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        req = msg.value
        if not isinstance(req, AdmissionRequest):
            raise WireError(f"expected AdmissionRequest, got {type(req).__name__}")
        if req.capability == "explode":
            raise WireError("capability 'explode' is refused by this test handler")
        old = state.get("claims", msg.key)
        if isinstance(old, AdmissionClaim):
            reply = AdmissionReply(
                admission_key=msg.key,
                outcome=AdmissionOutcome.DUPLICATE,
                run_id=old.run_id,
                replied_ms=now_ms,
            )
            return [Emit("admission.replies", msg.key, reply)]
        run_id = f"r-{self.instance}-{msg.partition}-{msg.offset}"
        claim = AdmissionClaim(
            admission_key=msg.key,
            run_id=run_id,
            capability=req.capability,
            tenant=req.tenant,
            status=RunStatus.ADMITTED,
            admitted_ms=now_ms,
            updated_ms=now_ms,
        )
        reply = AdmissionReply(
            admission_key=msg.key,
            outcome=AdmissionOutcome.ADMITTED,
            run_id=run_id,
            replied_ms=now_ms,
        )
        return [Emit("admission.claims", msg.key, claim), Emit("admission.replies", msg.key, reply)]


GROUP = "mini-admission"


def make_processor(
    settings: Settings,
    instance: str,
    *,
    hook: object | None = None,
    consumer_overrides: Mapping[str, object] | None = None,
) -> Processor:
    config = ProcessorConfig(
        service="mini",
        group_id=settings.topic(GROUP),
        inputs=("admission",),
        batch_max=1000,
        batch_ms=200,
        tick_ms=None,
        consumer_overrides=dict(consumer_overrides or {}),
    )
    return Processor(
        settings,
        config,
        MiniAdmission(instance),
        before_commit=hook,  # type: ignore[arg-type]
    )


def _main() -> int:
    settings = dataclasses.replace(Settings.from_env(), instance_id=os.environ["MINI_INSTANCE"])
    marker = Path(os.environ.get("MINI_MARKER", "/dev/null"))
    mode = os.environ.get("MINI_HOOK", "")
    stall_s = float(os.environ.get("MINI_STALL_S", "3600"))
    fired = threading.Event()

    def hook() -> None:
        # Only the first transaction stalls: the outputs are queued (and, after the sleep,
        # on the broker) but not committed. The test then kills us, or lets us go on late.
        if not mode or fired.is_set():
            return
        fired.set()
        time.sleep(1.0)  # let the producer send the batch (linger.ms is 5)
        marker.write_text("stalled")
        time.sleep(stall_s)
        marker.write_text("resumed")

    overrides: dict[str, object] = {}
    if mode == "stall":
        # Small limits so a stalled instance is evicted from the group quickly.
        overrides = {"session.timeout.ms": 6000, "max.poll.interval.ms": 6000}
    stop = threading.Event()
    install_signal_handlers(stop)
    processor = make_processor(
        settings, settings.instance_id, hook=hook, consumer_overrides=overrides
    )
    try:
        processor.run(stop)
    except ProcessorStopped as exc:
        print(f"STOPPED: {exc}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(_main())
