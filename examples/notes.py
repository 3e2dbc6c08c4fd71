"""An agent whose tools are on an MCP server: ``notes`` (``runplane.fakes.mcp_notes``).

The tools config (``examples/tools/notes.yaml``) names the server and declares each tool it
offers: ``notes/add`` reads, ``notes/append_note`` mutates and reconciles through the
``notes/find_note`` probe. Each call is a journaled effect with provenance
``tool://notes/<tool>``; a crash between announce and record of ``append_note`` asks
``find_note`` whether the note exists instead of writing it again.
"""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent

TOOLS = ("notes/add", "notes/append_note", "notes/find_note")


@agent("note", tools=TOOLS)
async def note(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    total = await ctx.tool("notes/add", {"a": input["a"], "b": input["b"]})
    written = await ctx.tool(
        "notes/append_note",
        {"note_id": input["note_id"], "text": f"sum={total}", "slow_s": input.get("slow_s", 0)},
    )
    return {"sum": total, "note": written}
