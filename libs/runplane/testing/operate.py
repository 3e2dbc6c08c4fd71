"""The test driver's verbs for operating a run: signal, update, cancel, and time passing.

A mixin of ``runplane.testing.driver.Driver`` (which owns the state declared here): what a person or
a system does to a live run — send it a signal or an update, cancel it — and what the executor's
timer scan does when time passes (``advance``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from runplane.core import canonical_json
from runplane.core.engine import Event, timer_due
from runplane.core.updates import wire_name
from runplane.wire import Signal, UpdateAnswer, Wake

if TYPE_CHECKING:
    from runplane.testing.driver import FakeClock, RunView
    from runplane.testing.session import _Session

__all__ = ["OperateVerbs"]


class OperateVerbs:
    """``Driver.signal`` / ``update`` / ``cancel`` / ``advance``."""

    clock: FakeClock
    sessions: dict[str, _Session]
    answers: list[UpdateAnswer]
    _inbox: deque[Event]

    def _drain(self) -> None:
        raise NotImplementedError

    def view(self, session_id: str) -> RunView:
        raise NotImplementedError

    def signal(
        self,
        session_id: str,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
        sent_by: str | None = None,
    ) -> RunView:
        self._inbox.append(
            Signal(
                session_id=session_id,
                name=name,
                payload_json=canonical_json(payload),
                sent_ms=self.clock.now_ms(),
                signal_id=signal_id,
                sent_by=sent_by,
            )
        )
        self._drain()
        return self.view(session_id)

    def update(
        self,
        session_id: str,
        name: str,
        payload: Any = None,
        *,
        update_id: str,
        sent_by: str | None = None,
    ) -> UpdateAnswer | None:
        """Send the update ``name`` (``runplane runs update``: the reserved signal) and run
        until idle → the run's answer to ``update_id`` sent meanwhile (refused or answered),
        or None when it has not answered yet."""
        sent = len(self.answers)
        self.signal(session_id, wire_name(name), payload, signal_id=update_id, sent_by=sent_by)
        mine = [a for a in self.answers[sent:] if a.update_id == update_id]
        return mine[-1] if mine else None

    def cancel(self, session_id: str, reason: str = "", *, by: str = "operator") -> RunView:
        """Cancel the run as ``by`` (``runplane runs cancel``: the reserved signal)."""
        return self.signal(session_id, "runplane.cancel", {"reason": reason}, sent_by=by)

    def advance(self, ms: int) -> None:
        """Move the clock on by ``ms`` and wake every run whose durable timer is due (what
        the executor's timer scan does)."""
        self.clock.advance(ms)
        now = self.clock.now_ms()
        for sid, session in self.sessions.items():
            due = None if session.snapshot is None else timer_due(session.snapshot)
            if due is not None and due <= now:
                self._inbox.append(Wake(session_id=sid, reason="timer", sent_ms=now))
        self._drain()
