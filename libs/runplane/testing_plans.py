"""The test driver's admission of commissioned children (``ctx.commission``, fan-out).

A mixin of ``runplane.testing.Driver`` (which owns the state declared here): a commission's
``AdmissionRequest`` is admitted as admission would — one run per admission key, ever — and
started once the current step is committed; a child's result then reaches its parent as the
``Signal`` the child's last step sends.
"""

from __future__ import annotations

from collections import deque

from runplane.wire import AdmissionRequest

__all__ = ["CommissionVerbs"]


class CommissionVerbs:
    """``Driver.children``: each child admission key and the run it started."""

    children: dict[str, str]
    _admissions: deque[AdmissionRequest]
    _counter: int

    def _start(
        self, sid: str, capability: str, input_json: str, admission_key: str, case_id: str | None
    ) -> None:
        raise NotImplementedError

    def _admit(self, request: AdmissionRequest) -> None:
        """A commission's child, admitted as admission would: one run per key, ever."""
        if request.admission_key in self.children:
            return
        self._counter += 1
        sid = f"child-{self._counter}"
        self.children[request.admission_key] = sid
        self._start(sid, request.capability, request.input_json, request.admission_key, None)
