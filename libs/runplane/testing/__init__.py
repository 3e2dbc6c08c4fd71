"""What a test of an agent needs — the front door agent authors import from::

    from runplane.testing import Driver, FakeClock, ScriptedProvider, assert_replays

- ``driver``: ``Driver`` (the executor and the other services in memory, with the executor's
  commit discipline, and ``crash`` anywhere), ``FakeClock``, ``ScriptedProvider``, ``RunView``,
  ``Crash``; its verbs for starting runs (``plans``) and operating them (``operate``), and the
  state of one run they share (``session``).
- ``models``: ``ScriptedModel``, a tool-calling model for agent-loop tests (``Call``, turn by
  turn, parallel calls, refusals seen, obedient to injections), and what it has ``Seen``.
- ``golden``: ``assert_replays``, golden journals in a project's own tests.
- ``closing``: the cases service's closing rule in small, for the Driver.
"""

from __future__ import annotations

from runplane.testing.driver import Crash, Driver, FakeClock, RunView, ScriptedProvider
from runplane.testing.golden import assert_replays
from runplane.testing.models import Call, ScriptedModel, Seen

__all__ = [
    "Call",
    "Crash",
    "Driver",
    "FakeClock",
    "RunView",
    "ScriptedModel",
    "ScriptedProvider",
    "Seen",
    "assert_replays",
]
