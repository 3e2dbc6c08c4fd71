"""What a test of an agent needs — the front door agent authors import from::

    from runplane.testing import Driver, FakeClock, ScriptedProvider, assert_replays

- ``driver``: ``Driver`` (the executor and the other services in memory, with the executor's
  commit discipline, and ``crash`` anywhere), ``FakeClock``, ``ScriptedProvider``, ``RunView``,
  ``Crash``; its verbs for starting runs (``plans``) and operating them (``operate``), and the
  state of one run they share (``session``).
- ``golden``: ``assert_replays``, golden journals in a project's own tests.
- ``closing``: the cases service's closing rule in small, for the Driver.
"""

from __future__ import annotations

from runplane.testing.driver import Crash, Driver, FakeClock, RunView, ScriptedProvider
from runplane.testing.golden import assert_replays

__all__ = ["Crash", "Driver", "FakeClock", "RunView", "ScriptedProvider", "assert_replays"]
