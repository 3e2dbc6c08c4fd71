"""``runplane runs watch RUN``: a run's live stream in the terminal.

Text as it arrives, a line per tool call proposed, started, finished or refused, a line when
the run parks on a person or resumes, and its end; an attempt that supersedes another (a
retry, or a generation restarted after its executor crashed) is announced before its text.
``--after ID`` resumes after an event id; ``--json`` prints each event as a JSON line. The
stream is a view (``runs.stream``), the journal the truth (``runplane runs show``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from runplane.cli.runs import runs_app
from runplane.config import Settings
from runplane.runs.client import Client
from runplane.runs.stream import event_json

# How a run ended → the exit code (completed 0, failed or worse 1).
_EXIT = {"completed": 0}


def _finished(p: dict[str, Any]) -> str:
    return f"⚙ {p.get('name')} " + ("ok" if p.get("ok") else f"failed ({p.get('error', '?')})")


# A line per event kind (TEXT_DELTA is inline; TOOL_CALL_DELTA is said whole by its proposal).
_LINES: dict[str, Callable[[tuple[int, int], dict[str, Any]], str]] = {
    "TURN_STARTED": lambda slot, p: f"── turn {slot[1]} · {p.get('provider')}/{p.get('model')}",
    "TOOL_CALL_PROPOSED": lambda _, p: (
        f"→ proposes {p.get('name')}({json.dumps(p.get('arguments', {}), sort_keys=True)})"
    ),
    "TOOL_CALL_STARTED": lambda _, p: f"⚙ {p.get('name')} …",
    "TOOL_CALL_FINISHED": lambda _, p: _finished(p),
    "TOOL_CALL_REFUSED": lambda _, p: f"✗ refused {p.get('name')}: {p.get('reason', '')}",
    "PARKED": lambda _, p: f"⏸ parked {p.get('parked_on', '')}".rstrip(),
    "RESUMED": lambda _, p: "▶ resumed",
    "PROGRESS": lambda _, p: f"· {p.get('message', json.dumps(p, sort_keys=True))}",
    "ENDED": lambda _, p: f"■ {p.get('status', 'ended')}",
}


@dataclass
class View:
    """What the terminal shows of the events so far (pure: events in, text out)."""

    attempts: dict[tuple[int, int], int] = field(default_factory=dict)
    in_text: bool = False
    ended: str | None = None

    def show(self, e: dict[str, Any]) -> str:
        kind, p = e["kind"], e["payload"]
        slot = (e["era"], e["call_seq"])
        out = ""
        if e["call_seq"] >= 0:
            seen = self.attempts.get(slot)
            if seen is not None and seen != e["attempt"]:
                out += self._line(f"↻ call {slot[0]}/{slot[1]} restarted (attempt {e['attempt']})")
            self.attempts[slot] = e["attempt"]
        if kind == "TEXT_DELTA":
            self.in_text = True
            return out + str(p.get("text", ""))
        if kind == "ENDED":
            self.ended = str(p.get("status", "ended"))
        line = _LINES.get(kind)
        return out if line is None else out + self._line(line(slot, p))

    def _line(self, text: str) -> str:
        lead = "\n" if self.in_text else ""
        self.in_text = False
        return f"{lead}{text}\n"


async def _watch(
    settings: Settings, run_id: str, after: int | None, as_json: bool, write: Callable[[str], Any]
) -> View:
    view = View()
    with Client(settings) as client:
        async for item in client.stream(run_id, after=after):
            e = event_json(item)
            text = json.dumps(e, sort_keys=True) + "\n" if as_json else view.show(e)
            if as_json and e["kind"] == "ENDED":
                view.show(e)
            write(text)
            sys.stdout.flush()
    return view


def watch_cmd(
    run_id: str = typer.Argument(..., help="the run to watch"),
    after: int | None = typer.Option(None, "--after", min=0, help="resume after this event id"),
    as_json: bool = typer.Option(False, "--json", help="one JSON line per event"),
) -> None:
    """Watch a run live: text as it arrives, tool calls and waits as they happen."""
    try:
        view = asyncio.run(_watch(Settings.from_env(), run_id, after, as_json, sys.stdout.write))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(_EXIT.get(view.ended or "", 1))


def register(app: typer.Typer) -> None:
    """``watch`` in the ``runs`` group."""
    runs_app.command("watch")(watch_cmd)
