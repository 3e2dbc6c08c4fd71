"""The label a tool declares for what it returns (trust, sensitivity), as a wire ``Label``."""

from __future__ import annotations

from runplane.errors import ConfigError
from runplane.wire import Label, Sensitivity, Trust


def source_label(name: str, *, trust: str | None, sensitivity: str | None) -> Label | None:
    """``None`` when the tool declares neither (the engine's source label alone applies).

    The engine joins this with its own source label, so an undeclared half stays at the
    bottom (trusted, public) here and cannot lower what the engine applies."""
    if trust is None and sensitivity is None:
        return None
    try:
        return Label(
            trust=Trust((trust or "trusted").upper()),
            sensitivity=Sensitivity((sensitivity or "public").upper()),
            provenance=(),
        )
    except ValueError as exc:
        raise ConfigError(f"tool {name}: {exc}") from exc
