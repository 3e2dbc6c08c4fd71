"""Crash hooks for the in-memory Driver (``Driver.crash_hook``)."""

from __future__ import annotations

from collections.abc import Callable

from runplane.core import LiveCall

CrashAt = Callable[[str, LiveCall], bool]


def crash_once(pred: CrashAt) -> CrashAt:
    """A hook that crashes the first time ``pred(phase, call)`` holds, and never again."""
    done = {"n": 0}

    def hook(phase: str, call: LiveCall) -> bool:
        if done["n"] == 0 and pred(phase, call):
            done["n"] = 1
            return True
        return False

    return hook
