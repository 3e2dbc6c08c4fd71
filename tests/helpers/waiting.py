"""``wait_for``: poll until something becomes true, and give back what made it true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T],
    *,
    what: str = "condition",
    timeout_s: float = 45.0,
    every_s: float = 0.25,
) -> T:
    """Call ``probe`` every ``every_s`` until it returns something truthy, and return that.

    ``TimeoutError`` naming ``what`` after ``timeout_s`` (a test that wants more context
    catches it and raises its own failure with, say, a service's log)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(every_s)
