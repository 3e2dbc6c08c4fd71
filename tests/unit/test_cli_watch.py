"""``runplane runs watch``'s view: text inline as it arrives, a line per call and wait, a
restarted attempt announced before its text, the end."""

from __future__ import annotations

from typing import Any

from runplane.cli.watch import View


def _e(kind: str, payload: dict[str, Any], call_seq: int = 1, attempt: int = 10) -> dict[str, Any]:
    return {"kind": kind, "payload": payload, "era": 0, "call_seq": call_seq, "attempt": attempt}


def test_the_view_shows_text_inline_and_calls_on_their_own_lines() -> None:
    view = View()
    events = [
        _e("TURN_STARTED", {"provider": "openai", "model": "m"}),
        _e("TEXT_DELTA", {"text": "Hel"}),
        _e("TEXT_DELTA", {"text": "lo"}),
        _e("TOOL_CALL_DELTA", {"index": 0, "arguments": '{"a"'}),
        _e("TOOL_CALL_PROPOSED", {"name": "lookup", "arguments": {"a": 1}}),
        _e("TOOL_CALL_STARTED", {"name": "lookup"}, call_seq=2),
        _e("TOOL_CALL_FINISHED", {"name": "lookup", "ok": True}, call_seq=2),
        _e("PARKED", {"parked_on": "TASK"}, call_seq=-1),
        _e("ENDED", {"status": "completed"}, call_seq=-1),
    ]
    text = "".join(view.show(e) for e in events)
    assert text == (
        '── turn 1 · openai/m\nHello\n→ proposes lookup({"a": 1})\n⚙ lookup …\n'
        "⚙ lookup ok\n⏸ parked TASK\n■ completed\n"
    )
    assert view.ended == "completed"


def test_a_new_attempt_at_a_slot_is_announced_before_its_text() -> None:
    view = View()
    first = view.show(_e("TEXT_DELTA", {"text": "partial"}, attempt=10))
    again = view.show(_e("TEXT_DELTA", {"text": "whole"}, attempt=11))
    assert first == "partial"
    assert again == "\n↻ call 0/1 restarted (attempt 11)\nwhole"
    assert view.ended is None
