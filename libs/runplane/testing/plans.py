"""The test driver's admission: a run the test starts, and the children runs commission.

A mixin of ``runplane.testing.driver.Driver`` (which owns the state declared here). ``_start`` is what
admission does for a new run — seq 0 and the StartRun, the runtime started on the version
that serves it; ``_admit`` admits a commission's ``AdmissionRequest`` as admission would: one
run per admission key, ever (a replayed parent asks again and gets nothing new). A child's
result then reaches its parent as the ``Signal`` the child's last step sends.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from runplane.core.chain import run_start
from runplane.core.engine import Event
from runplane.testing.session import _Session
from runplane.wire import AdmissionRequest, StartRun

if TYPE_CHECKING:
    from runplane.core import AgentRegistry
    from runplane.core.limits import Limits
    from runplane.core.policy import Policy
    from runplane.testing.driver import FakeClock

__all__ = ["AdmissionVerbs"]


class AdmissionVerbs:
    """``Driver._start`` / ``_admit``, and ``Driver.children``: each child's admission key
    and the run it started."""

    agents: AgentRegistry
    clock: FakeClock
    calendars: Any
    limits: Limits | None
    policy: Policy | None
    sessions: dict[str, _Session]
    children: dict[str, str]
    _inbox: deque[Event]
    _admissions: deque[AdmissionRequest]
    _counter: int

    def _boot(self, sid: str, start: StartRun) -> None:
        raise NotImplementedError  # the Driver's: start a run, crashes included

    def _admit(self, request: AdmissionRequest) -> None:
        """A commission's child, admitted as admission would: one run per key, ever."""
        if request.admission_key in self.children:
            return
        self._counter += 1
        sid = f"child-{self._counter}"
        self.children[request.admission_key] = sid
        self._start(
            sid,
            request.capability,
            request.input_json,
            request.admission_key,
            None,
            delegation_json=request.delegation_json,
        )

    def _start(
        self,
        sid: str,
        capability: str,
        input_json: str,
        admission_key: str,
        case_id: str | None,
        agent_version: str | None = None,
        *,
        delegation_json: str | None = None,
    ) -> None:
        now = self.clock.now_ms()
        admitted, start = run_start(
            sid,
            capability=capability,
            admission_key=admission_key,
            tenant="test",
            initiator="tester",
            input_json=input_json,
            now_ms=now,
            case_id=case_id,
            agent_version=agent_version,
            delegation_json=delegation_json,
        )
        self.sessions.setdefault(sid, _Session()).journal.append(admitted)
        self._boot(sid, start)
