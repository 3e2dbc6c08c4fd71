"""CLI: journal commands (not built yet)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the journal commands to the root app."""
