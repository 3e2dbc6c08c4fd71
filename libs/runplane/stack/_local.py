"""``ensure_up``: the one call a test session or a demo needs to have a stack to talk to."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from runplane.config import Settings
from runplane.stack._config import StackConfig
from runplane.stack._stack import Progress, StackReport, up


@dataclass(frozen=True)
class LocalStack:
    """A running local stack: the settings that reach it, its config, and what ``up`` did."""

    settings: Settings
    config: StackConfig
    report: StackReport


def ensure_up(
    settings: Settings, *, root: Path | None = None, progress: Progress | None = None
) -> LocalStack:
    """Start the stack ``settings`` point at unless it already answers (see :func:`up`).

    A relative ``settings.state_dir`` is anchored at ``root`` (default: the current directory);
    the returned settings carry the absolute state dir.
    """
    config = StackConfig.from_settings(settings, root=root)
    report = up(config, progress=progress)
    return LocalStack(dataclasses.replace(settings, state_dir=config.state_dir), config, report)
