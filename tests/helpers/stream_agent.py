"""The live-stream tests' agent: one generation, its text returned, a progress note before
and after. Registered nowhere here (``stream_served`` registers it for executor processes)."""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx


async def narrate(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    ctx.progress("asking the model")
    gen = await ctx.generate("openai", "default", "tell me a story")
    ctx.progress("told", words=len(gen.text.split()))
    return {"text": gen.text}
