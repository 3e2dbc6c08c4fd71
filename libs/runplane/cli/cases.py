"""CLI: cases commands (not built yet)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the cases commands to the root app."""
