"""The triage agent: a generation, a versioned case-state update, and a deadline.

A ticket arrives for a case. The model classifies it (a journaled generation: a replay never
re-pays it); the agent reads the case's state and version and writes the classification back
*at that version* (``put_case_state`` is refused if the case moved — then it reads again and
retries once); it attaches an obligation "first-response" due one day later on the wall
calendar, warned two hours before, with a follow-up ``escalation`` run on breach.

``escalation`` is that follow-up, registered here so it actually runs: when the obligation
breaches, the cases service asks admission for it with the reserved correlation key
``runplane.case`` = the triaged case, so it lands on the same case. It records the breach in
the case state (a versioned write, like triage's) and raises the case's priority. (The name
is the one every recorded triage run already journaled in its deadline request; renaming it
would make those histories diverge on replay.)
"""

from __future__ import annotations

from typing import Any

from runplane.core import CaseConflict, StepCtx, agent, days, hours
from runplane.core.gate import SinkDecl, sinks

ESCALATION_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "case_id": {"type": "string", "minLength": 1},
        "obligation": {"type": "string", "minLength": 1},
        "due_ms": {"type": "integer"},
        "sweep_run_id": {"type": "string", "minLength": 1},
    },
    "required": ["case_id", "obligation", "due_ms", "sweep_run_id"],
}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ticket": {"type": "string", "minLength": 1}, "model": {"type": "string"}},
    "required": ["ticket"],
}

_LABELS = ("billing", "outage", "account", "other")


def _label_of(text: str) -> str:
    words = text.strip().lower().split()
    return words[0].strip(".,:;!") if words and words[0].strip(".,:;!") in _LABELS else "other"


# The default model is not mutating and may see internal data (the ticket), nothing above.
@sinks(SinkDecl("model:openai/gpt-4o-mini", mutating=False, ceiling="INTERNAL"))
@agent("triage", durability="replayable", input_schema=INPUT_SCHEMA, models=["openai"])
async def triage(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    generation = await ctx.generate(
        "openai",
        input.get("model", "gpt-4o-mini"),
        [
            {
                "role": "system",
                "content": f"Classify the ticket as one of: {', '.join(_LABELS)}. Answer with the label.",
            },
            {"role": "user", "content": input["ticket"]},
        ],
        temperature=0,
    )
    label = _label_of(generation.text)
    version = await _record_label(ctx, label)
    due = await ctx.deadline("first-response", days(1), hours(2), on_breach="escalation")
    return {"label": label, "case_version": version, "first_response_due_ms": due}


async def _record_label(ctx: StepCtx, label: str) -> int:
    for _ in range(2):
        current = await ctx.case_state()
        state = dict(current.state or {})
        state["triage"] = {"label": label, "by": ctx.run_id}
        try:
            return int(await ctx.put_case_state(current.version, state))
        except CaseConflict:
            continue  # the case moved between our read and write: read again
    raise CaseConflict(-1, "case kept moving; giving up after two attempts")


@agent("escalation", durability="replayable", input_schema=ESCALATION_INPUT_SCHEMA)
async def escalate(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    if ctx.case_id != input["case_id"]:
        # Admission put the run on another case than the breach names: writing there would
        # escalate the wrong customer's case.
        raise ValueError(f"run is on case {ctx.case_id!r}, the breach is on {input['case_id']!r}")
    breach = {
        "obligation": input["obligation"],
        "due_ms": input["due_ms"],
        "sweep_run_id": input["sweep_run_id"],
    }
    for _ in range(2):
        current = await ctx.case_state()
        state = dict(current.state or {})
        state["escalations"] = [*state.get("escalations", []), breach]
        state["priority"] = "high"
        try:
            version = int(await ctx.put_case_state(current.version, state))
        except CaseConflict:
            continue  # the case moved between our read and write: read again
        return {
            "case_id": input["case_id"],
            "escalated": input["obligation"],
            "case_version": version,
        }
    raise CaseConflict(-1, "case kept moving; giving up after two attempts")
