"""Cancellation down the tree on the real broker (issue 33): a parent with three children,
one of them a grandparent of two more, all served by the stock executor process; the parent is
cancelled once every leaf waits: every run of the tree ends RUN_CANCELLED, every leaf's
compensation ran once, and every chain verifies."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from test_plan_commission import RUNPLANE, Service, _admitted, _claims

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.runs.client import Client
from runplane.wire import AdmissionRequest, JournalKind, RunStatus
from tests.helpers.harness import chain_of, plain_producer, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEY = "tree-cancel-1"
ROOT = Path(__file__).resolve().parents[2]
# The served module lives in tests/: the service processes import it from the repository root.
EXTRA = {"RUNPLANE_AGENT_MODULES": "tests.helpers.cancel_tree_served", "PYTHONPATH": str(ROOT)}


def _tree(settings: Settings, parent: str) -> list[str]:
    return sorted(
        {
            r.session_id
            for r in _admitted(settings)
            if r.attrs.get("admission_key", "").startswith("runplane.child/")
        }
    )


def test_a_cancelled_parent_cancels_its_whole_tree_with_compensations(
    settings: Settings, tmp_path: Path
) -> None:
    admission = Service(
        settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path, EXTRA
    )
    executor = Service(
        settings, [sys.executable, "-m", "services.executor"], "executor", tmp_path, EXTRA
    )
    try:
        producer = plain_producer(settings)
        request = AdmissionRequest(
            admission_key=KEY,
            capability="tree.top",
            input_json="{}",
            tenant="acme",
            initiator="emitter",
            requested_ms=int(time.time() * 1000),
        )
        send(producer, settings, "admission", KEY, request)
        producer.flush(10)
        wait_for(lambda: KEY in _claims(settings), timeout_s=90, what="the parent admitted")
        parent = _claims(settings)[KEY].run_id

        def leaves_waiting() -> bool:
            snaps = sessions(settings)
            parked = [
                s
                for s in snaps.values()
                if s.capability == "tree.leaf" and s.status is RunStatus.PARKED
            ]
            return len(parked) == 4

        wait_for(leaves_waiting, timeout_s=120, every_s=0.3, what="four leaves parked")
        with Client(settings) as client:
            client.cancel(parent, reason="the customer withdrew", sent_by="ops-ada", tenant="acme")

        tree = [parent, *_tree(settings, parent)]
        assert len(tree) == 6  # the parent, three children, two grandchildren

        def all_ended() -> bool:
            snaps = sessions(settings)
            return all(
                sid in snaps and snaps[sid].status in (RunStatus.FAILED, RunStatus.COMPLETED)
                for sid in tree
            )

        wait_for(all_ended, timeout_s=120, every_s=0.3, what="every run of the tree to end")
    finally:
        executor.stop()
        admission.stop()

    released: list[str] = []
    for sid in tree:
        records, results = chain_of(settings, sid)
        assert verify_chain(records, results).ok, sid
        assert records[-1].kind is JournalKind.RUN_CANCELLED, (sid, records[-1].kind)
        asked = [r for r in records if r.kind is JournalKind.CANCEL_REQUESTED]
        assert len(asked) == 1 and asked[0].attrs["requested_by"] == "ops-ada", sid
        released += [
            json.loads(e.value_json or "null")["released"]
            for e in results.values()
            if e.name == "tool://release" and e.ok
        ]
    assert sorted(released) == ["1", "2", "3.a", "3.b"]  # each compensation once
    top = chain_of(settings, parent)[0]
    cascade = next(r for r in top if r.kind is JournalKind.CANCEL_REQUESTED)
    assert len(cascade.attrs["cascaded_to"].split(",")) == 3
