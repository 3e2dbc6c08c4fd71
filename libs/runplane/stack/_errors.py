"""The stack's one error: it says what went wrong, how to fix it, and carries the log tail."""

from __future__ import annotations

from runplane.errors import RunplaneError


class StackError(RunplaneError):
    """The local stack could not be started, stopped or inspected (the message says why)."""


class StackStartTimeout(StackError):
    """A component was alive but did not answer in time (a loaded machine: worth one retry)."""
