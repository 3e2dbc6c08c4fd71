"""An agent whose tools are on an MCP server: ``notes`` (``runplane.fakes.mcp_notes``).

The tools config (``examples/tools/notes.yaml``) names the server and declares each tool it
offers: ``notes/add`` reads, ``notes/append_note`` mutates and reconciles through the
``notes/find_note`` probe. Each call is a journaled effect with provenance
``tool://notes/<tool>``; a crash between announce and record of ``append_note`` asks
``find_note`` whether the note exists instead of writing it again.

An MCP server's answers are untrusted, so the text written (the sum ``add`` returned) is
too, and the gate refuses it to a mutating tool nobody declared. ``@sinks`` declares what
``append_note`` takes: the note id, protected, from the run's input; the text may be untrusted.
"""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent
from runplane.core.gate import FieldRule, SinkDecl, sinks

TOOLS = ("notes/add", "notes/append_note", "notes/find_note")


APPEND_NOTE = SinkDecl(
    "tool://notes/append_note",
    protected=(FieldRule("$.note_id", sources=("input:admission",)),),
)


@sinks(APPEND_NOTE)
@agent("note", tools=TOOLS)
async def note(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    total = await ctx.tool("notes/add", {"a": input["a"], "b": input["b"]})
    written = await ctx.tool(
        "notes/append_note",
        {"note_id": input["note_id"], "text": f"sum={total}", "slow_s": input.get("slow_s", 0)},
    )
    return {"sum": total, "note": written}
