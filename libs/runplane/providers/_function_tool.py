"""Registered Python callables as tools (``runplane.core.Tool``).

The callable takes the call's arguments as keyword arguments (plus ``idempotency_key`` when
it declares that parameter: a mutating tool that reconciles must, see ``_keyed``) and may be
sync or async. What it raises is the call's outcome:
``RetryableError`` asks for a retry, ``TerminalError`` fails at once, and for a mutating tool
any other exception is trusted as "it ran and failed" (see ``services.executor.live``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.errors import ConfigError
from runplane.providers._keyed import require_key
from runplane.wire import Label


class FunctionTool:
    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        decl: EffectDecl | None = None,
        label: Label | None = None,
    ) -> None:
        if not name:
            raise ConfigError("a tool needs a name")
        self.name = name
        # In process: a call that mutates nothing and may be repeated lets its announce ride
        # with its outcome (EffectDecl.announce_rides); HTTP and MCP tools never do.
        self.decl = dataclasses.replace(
            decl if decl is not None else EffectDecl(name), in_process=True
        )
        self.label = label  # what the tool declares for its results; None: the source label
        self.fn = fn
        self._fn = fn
        # The key reaches the peer only through the function: one that takes no key cannot
        # pass it on, so it may not reconcile a mutation (``_keyed``).
        self.carries_key = "idempotency_key" in inspect.signature(fn).parameters
        require_key(
            self.decl,
            carries=self.carries_key,
            lacks="its function takes no idempotency_key parameter",
        )

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None = None) -> Any:
        kwargs = dict(args)
        if self.carries_key:
            kwargs["idempotency_key"] = idempotency_key
        result = self._fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result
