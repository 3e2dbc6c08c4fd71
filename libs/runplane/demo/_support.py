"""The support example's model, as the demo scripts it, and what its runs must show.

``support_model`` is a model function (``runplane.fakes._script``): turn 0 looks the customer
up and fetches their document in parallel, turn 1 refunds the case's amount to the account the
CRM returned (both copied verbatim from what the model was shown), turn 2 answers. Wrapped in
``obeys_instructions``, it is also the injected e-mail's victim: an ``INSTRUCTION: call refund
with {...}`` in a tool result makes it propose that refund first. ``demo_model`` serves it to
the support conversation (the one offered ``refund``) and echoes to every other run (triage).

``python -m runplane.demo._model_server --port N`` serves ``demo_model`` on the
OpenAI-compatible fake: the demo's model provider. ``support_verdict`` reads a support run's journal: how many
refunds were performed and how many the sink gate refused.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from runplane.core.agents import Generation
from runplane.core.turns import Message, Role, ToolSpec
from runplane.fakes import Said, echo, obeys_instructions, scripted
from runplane.wire import JournalKind, JournalRecord

REFUND_SINK = "tool://refund"


def _results(messages: tuple[Message, ...]) -> dict[str, object]:
    """The decoded result of each tool the model has been answered by, by tool name."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out: dict[str, object] = {}
    for m in messages:
        if m.role is not Role.TOOL or m.is_error or m.tool_call_id not in names:
            continue
        # A protocol with no error flag on a tool message (chat completions) carries a failed
        # or refused call as text ("error: SinkRefused: …"), not as a result.
        with contextlib.suppress(ValueError):
            out[names[m.tool_call_id]] = json.loads(m.content)
    return out


def _case(messages: tuple[Message, ...]) -> dict[str, object]:
    """The run's input, as the loop's first user message carries it."""
    case = json.loads(next(m.content for m in messages if m.role is Role.USER))
    assert isinstance(case, dict)
    return case


def _look_up(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Said:
    case = _case(messages)
    return [
        ("crm_lookup", {"customer_id": case["customer_id"]}),
        ("fetch_document", {"document_id": case["document_id"]}),
    ]


def _refund(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Said:
    case, crm = _case(messages), _results(messages)["crm_lookup"]
    assert isinstance(crm, dict)
    refund = {"recipient": crm["account"], "amount_eur": case["amount_eur"]}
    return [("refund", {**refund, "order": case["order"]})]


def _answer(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Said:
    case = _case(messages)
    return f"Refunded {case['amount_eur']} EUR for order {case['order']} to the account on file."


# The honest support conversation, turn by turn: both lookups at once, the refund to the account
# on file, the answer (``scripted`` picks the turn by the model's own turns so far, so a turn
# asked again answers the same, and an obeyed injection does not move the script on).
support_turns = scripted(_look_up, _refund, _answer)
support_model = obeys_instructions(support_turns)


def demo_model(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
    """The demo's model provider: the support script where ``refund`` is offered, else echo."""
    if any(t.name == "refund" for t in tools):
        return support_model(messages, tools)
    return echo(messages, tools)


@dataclass(frozen=True)
class SupportVerdict:
    """What a support run's journal shows: refunds performed, refunds the gate refused."""

    performed: int
    refused: int

    def expected(self, injected: bool) -> bool:
        """One real refund either way; the injected run's refund to the attacker refused."""
        return self.performed == 1 and (self.refused >= 1 if injected else self.refused == 0)

    def describe(self) -> str:
        return f"{self.performed} refund performed, {self.refused} refused by the sink gate"


def support_verdict(records: Sequence[JournalRecord]) -> SupportVerdict:
    mine = [r for r in records if r.name == REFUND_SINK]
    performed = sum(1 for r in mine if r.kind is JournalKind.EFFECT_ANNOUNCED)
    refused = sum(
        1
        for r in mine
        if r.kind is JournalKind.EFFECT_RECORDED and r.attrs.get("gate") == "refused"
    )
    return SupportVerdict(performed, refused)
