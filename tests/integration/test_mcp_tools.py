"""MCP tools: a real MCP server (the ``mcp`` SDK's ``MCPServer``, ``runplane.fakes.mcp_notes``)
on loopback, over stdio and streamable HTTP, called by the stock executor as journaled effects.

The provider test lists schemas once and calls tools over both transports with no Kafka; the
durable test runs the ``note`` agent on the real stack and kills the executor (SIGKILL)
after the MCP server performed ``append_note`` but before the executor recorded it: the next
executor finds the call announced and unrecorded, runs the declared recovery (reconcile,
probe ``notes/find_note``) and completes the run with the note written once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from test_stock_executor_support import StockExecutor

from runplane.config import Settings
from runplane.errors import ConfigError, TerminalError
from runplane.fakes.mcp_notes import read_notes
from runplane.providers import ToolRegistry, build_tools, parse_tools_config
from runplane.providers._mcp import open_mcp_sessions
from runplane.wire import JournalKind, ResultEntry, RunStatus
from tests.helpers.harness import admit, chain_of, plain_producer, read_topic, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
DECLS = [
    {"name": "add", "mutating": False, "recovery": "retry"},
    # One 10 s attempt: a doubt about it is probed 10 s after its announce (decisions §32).
    {
        "name": "append_note",
        "mutating": True,
        "recovery": "reconcile",
        "probe": "notes/find_note",
        "timeout_s": 10,
        "max_attempts": 1,
    },
    {"name": "find_note", "mutating": False},
    {"name": "fail", "mutating": False},
]


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The notes MCP server over streamable HTTP, its own process: it outlives an executor."""
    state = tmp_path / "http-notes.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runplane.fakes.mcp_notes", "--state", str(state), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        yield url, state
    finally:
        proc.kill()  # a request may still be sleeping in it (slow_s); nothing to flush
        proc.wait(30)


def _stdio_doc(state: Path) -> dict[str, object]:
    command = [sys.executable, "-m", "runplane.fakes.mcp_notes", "--state", str(state)]
    return {"name": "notes", "command": command, "tools": DECLS}


async def test_provider_lists_once_and_calls_over_stdio_and_http(
    http_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, http_state = http_server
    stdio_state = tmp_path / "stdio-notes.jsonl"
    doc = {
        "mcp_servers": [
            _stdio_doc(stdio_state),
            {
                "name": "remote",
                "url": url,
                "tools": [{**d, "probe": "remote/find_note"} if "probe" in d else d for d in DECLS],
            },
        ]
    }
    config = parse_tools_config(doc, {}, source="t")
    async with AsyncExitStack() as stack:
        sessions_ = await open_mcp_sessions(config.mcp_servers, stack, {})
        tools = build_tools(config, None, {}, python_tools=ToolRegistry(), mcp_sessions=sessions_)
        for server, state in (("notes", stdio_state), ("remote", http_state)):
            assert await tools[f"{server}/add"].call({"a": 2, "b": 3}) == 5
            args = {"note_id": "n1", "text": "hi"}
            assert await tools[f"{server}/find_note"].call(args, idempotency_key="k1") is None
            written = await tools[f"{server}/append_note"].call(args, idempotency_key="k1")
            again = await tools[f"{server}/append_note"].call(args, idempotency_key="k1")
            found = await tools[f"{server}/find_note"].call(args, idempotency_key="k1")
            assert written == again == found == {**args, "idempotency_key": "k1"}
            assert len(read_notes(state)) == 1  # the key reached the server: deduplicated
            with pytest.raises(TerminalError, match="boom"):
                await tools[f"{server}/fail"].call({"message": "boom"})
        label = getattr(tools["notes/add"], "label", None)
        assert label is not None
        [pinned] = label.provenance
        digest = sessions_["notes"].digests["add"]
        assert pinned == f"mcp://notes/add@sha256:{digest}"
        # The same server lists the same schemas over both transports.
        assert sessions_["remote"].digests == sessions_["notes"].digests

    missing = parse_tools_config(
        {
            "mcp_servers": [
                {**_stdio_doc(stdio_state), "tools": [{"name": "nope", "mutating": False}]}
            ]
        },
        {},
        source="t",
    )
    moved = parse_tools_config(
        {
            "mcp_servers": [
                {
                    **_stdio_doc(stdio_state),
                    "tools": [{"name": "add", "mutating": False, "schema_digest": "0" * 64}],
                }
            ]
        },
        {},
        source="t",
    )
    for bad, message in ((missing, "has no tool 'nope'"), (moved, "is not the pinned")):
        async with AsyncExitStack() as stack:
            with pytest.raises(ConfigError, match=message):
                await open_mcp_sessions(bad.mcp_servers, stack, {})


def _executor(settings: Settings, url: str, tmp_path: Path, name: str) -> StockExecutor:
    return StockExecutor(
        settings,
        {
            "RUNPLANE_AGENT_MODULES": "examples.notes",
            "RUNPLANE_TOOLS_CONFIG": str(ROOT / "examples" / "tools" / "notes.yaml"),
            "NOTES_MCP_URL": url,
        },
        tmp_path / f"{name}.log",
    )


def test_crash_between_announce_and_record_is_reconciled_through_the_probe(
    settings: Settings, http_server: tuple[str, Path], tmp_path: Path
) -> None:
    url, state = http_server
    first = _executor(settings, url, tmp_path, "first")
    try:
        # slow_s: the server writes the note, then holds the answer; the executor dies then.
        [run] = admit(
            plain_producer(settings),
            settings,
            "note",
            [{"a": 20, "b": 22, "note_id": "n-crash", "slow_s": 60}],
        )
        wait_for(lambda: len(read_notes(state)) == 1, timeout_s=90, what="the note written")
    finally:
        first.kill()
    assert sessions(settings)[run.run_id].status is not RunStatus.COMPLETED

    second = _executor(settings, url, tmp_path, "second")
    try:
        try:
            wait_for(
                lambda: (
                    (s := sessions(settings).get(run.run_id)) is not None
                    and s.status is RunStatus.COMPLETED
                ),
                timeout_s=90,
                what="the run completed",
            )
        except TimeoutError:
            raise AssertionError(f"not completed; log:\n{second.log_tail()}") from None
    finally:
        second.stop()

    notes = read_notes(state)
    assert len(notes) == 1  # performed once: the probe found it, nothing wrote it again
    chain, _ = chain_of(settings, run.run_id)
    kinds = [r.kind for r in chain]
    assert JournalKind.EFFECT_IN_DOUBT in kinds, kinds
    names = {r.name for r in chain}
    assert {"tool://notes/add", "tool://notes/append_note", "tool://notes/find_note"} <= names
    results = {
        r.name: r
        for _, r in read_topic(settings, "results")
        if isinstance(r, ResultEntry) and r.session_id == run.run_id
    }
    assert json.loads(results["tool://notes/add"].value_json or "null") == 42
    # The probe answered "applied", and its answer is the in-doubt call's recorded outcome.
    probe = [r for r in chain if r.name == "tool://notes/find_note"]
    assert probe[-1].attrs.get("applied") == "true"
    recorded = [r for r in chain if r.kind is JournalKind.EFFECT_RECORDED]
    assert any(
        r.name == "tool://notes/append_note" and r.attrs.get("reconciled") == "applied"
        for r in recorded
    )
    assert json.loads(results["tool://notes/append_note"].value_json or "null") == notes[0]
    add_label = results["tool://notes/add"].label
    assert any(p.startswith("mcp://notes/add@sha256:") for p in add_label.provenance)
    assert "tool://notes/add" in add_label.provenance


def test_stock_executor_runs_an_agent_on_a_stdio_mcp_server(
    settings: Settings, tmp_path: Path
) -> None:
    """The executor starts the server itself (stdio) from the config's command."""
    state = tmp_path / "stdio-notes.jsonl"
    config = tmp_path / "tools.yaml"
    doc = {"mcp_servers": [_stdio_doc(state)]}
    config.write_text(json.dumps(doc))  # JSON is YAML
    executor = StockExecutor(
        settings,
        {"RUNPLANE_AGENT_MODULES": "examples.notes", "RUNPLANE_TOOLS_CONFIG": str(config)},
        tmp_path / "executor.log",
    )
    try:
        [run] = admit(
            plain_producer(settings), settings, "note", [{"a": 1, "b": 2, "note_id": "n-stdio"}]
        )
        try:
            wait_for(
                lambda: (
                    (s := sessions(settings).get(run.run_id)) is not None
                    and s.status is RunStatus.COMPLETED
                ),
                timeout_s=90,
                what="the run completed",
            )
        except TimeoutError:
            raise AssertionError(f"not completed; log:\n{executor.log_tail()}") from None
    finally:
        executor.stop()
    [note] = read_notes(state)
    assert note["text"] == "sum=3"
    assert note["idempotency_key"].startswith(run.run_id)  # the call's key reached the server
