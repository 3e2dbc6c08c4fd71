"""Memory after approval: what a loop means to keep for later runs waits for a person's yes.

A memory formed from an answer that is then refused is read by the next run as established
fact. So a loop's notes are never written while it runs: with ``agent_loop(remember=True)``
the model is offered one more tool, ``remember`` (``SPEC``), which the loop answers itself
("held until the answer is approved") without performing anything; the notes are in
``LoopResult.notes``, rebuilt from the recorded turns like every other value of the loop.
They reach the run's case only through ``ctx.approve_answer`` (coded agents) or an
``agent-loop`` manifest with ``memory: case`` (declarative ones): the answer *and its notes*
go to the worklist as one task, and ``keep_approved`` appends them to the case's state —
only when that decision is a person's approval (an unattended proceed is not one). A rejection, an expiry without ``allow_unattended``, or a run
that fails before it is asked drops them: nothing was written to drop.

The notes sit in the case state under ``notes`` (oldest first, each with the run and turn
that formed it), where the next run of the case reads them (``ctx.case_state()``; ``notes``).
``keep_approved`` writes with the case's optimistic version and reads again on ``CaseConflict``, so
another run of the case writing in between costs a retry, never a lost note or a blind
overwrite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from runplane.core.effect import CaseConflict, CaseState, Decision, EffectError
from runplane.core.turns import ToolCall, ToolSpec

if TYPE_CHECKING:
    from runplane.core.ctx import StepCtx

__all__ = ["HELD", "MAX_NOTE", "REMEMBER", "SPEC", "Note", "keep_approved", "note_of", "notes"]

REMEMBER: Final = "remember"
MAX_NOTE: Final = 1000  # characters: a note is a sentence for the next run, not a document
HELD: Final = {"held": "kept for later runs once your answer is approved; dropped otherwise"}
_ATTEMPTS: Final = 5  # writes raced by other runs of the case before ``keep`` gives up

SPEC: Final = ToolSpec(
    REMEMBER,
    "Keep a short note on this case for later runs (a fact worth remembering). It is kept "
    "only once your answer is approved.",
    {
        "type": "object",
        "properties": {"note": {"type": "string", "description": "One sentence."}},
        "required": ["note"],
    },
)


@dataclass(frozen=True)
class Note:
    """One note a loop's model asked to keep: its text and the turn that proposed it."""

    text: str
    turn: int

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("a note is not empty")
        if len(self.text) > MAX_NOTE:
            raise ValueError(f"a note is at most {MAX_NOTE} characters, got {len(self.text)}")

    def to_json(self, run_id: str) -> dict[str, Any]:
        return {"text": self.text, "run": run_id, "turn": self.turn}


def note_of(call: ToolCall, turn: int) -> Note | str:
    """The note a ``remember`` call asks to keep, or why it is not one (the model's tool
    error: it may say it again, shorter)."""
    args = call.arguments
    if set(args) != {"note"} or not isinstance(args.get("note"), str):
        return 'remember takes one argument, "note", a string'
    try:
        return Note(args["note"], turn)
    except ValueError as exc:
        return str(exc)


def notes(state: Any) -> tuple[Mapping[str, Any], ...]:
    """The notes earlier runs kept on a case (its state as ``ctx.case_state()`` reads it)."""
    held = state.get("notes") if isinstance(state, Mapping) else None
    return tuple(n for n in held or () if isinstance(n, Mapping))


async def keep_approved(ctx: StepCtx, kept: Sequence[Note], decision: Decision) -> int:
    """Append ``kept`` to the run's case when ``decision`` (the approval of the answer they
    came with) is a person's yes → how many were kept; 0 otherwise, nothing written. A run
    with no case cannot keep notes (``EffectError`` ``NoCase``, from the case family)."""
    if not kept or not (decision.approved and decision.decided_by):
        return 0
    for _ in range(_ATTEMPTS):
        case: CaseState = await ctx.case_state()
        state = dict(case.state) if isinstance(case.state, Mapping) else {}
        state["notes"] = [*notes(state), *(n.to_json(ctx.run_id) for n in kept)]
        try:
            await ctx.put_case_state(case.version, state)
        except CaseConflict:
            continue  # another run of the case wrote first: read it again, append again
        return len(kept)
    raise EffectError("CaseConflict", f"the case moved {_ATTEMPTS} times while notes were kept")
