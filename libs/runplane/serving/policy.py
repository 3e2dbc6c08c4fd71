"""The deployment policy file (``RUNPLANE_POLICY``), read once at a service's start-up.

The executor binds every run to it; admission routes a queued capability's runs by its
``queues:`` and the queue service limits them by it (``runplane.core.policy`` parses it). A
file that cannot be read or does not parse is a ``ConfigError`` at start-up, never a surprise
later.
"""

from __future__ import annotations

from pathlib import Path

from runplane.core.policy import Policy, parse_policy
from runplane.errors import ConfigError

__all__ = ["load_policy"]


def load_policy(path: str | None) -> Policy | None:
    """The policy in ``path`` (None: no policy)."""
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"RUNPLANE_POLICY: cannot read {path!r}: {exc}") from exc
    return parse_policy(text)
