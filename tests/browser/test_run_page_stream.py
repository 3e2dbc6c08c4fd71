"""The run page updating live, in headless Chromium: an agent loop on the real broker (the stock
executor, the fake OpenAI-compatible model streaming over HTTP at a scripted pace, HTTP tools),
the runs UI serving the page. The page is opened while the
loop's first turn is held; then the browser watches the turns go by — tool calls proposed,
started and finished — and the last turn's answer arrive token by token, each delta appended
as it comes, until the run's end, all without a reload."""

from __future__ import annotations

import dataclasses
import functools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runplane.config import Settings
from runplane.fakes import FakeAnthropicServer, FakeOpenAIServer, scripted
from runplane.journal.summary import RunSummary
from runplane.providers import ToolRegistry
from runplane.runs.stream import follow
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus
from services.executor.settings import ExecutorSettings
from services.journal.api import build_api
from services.journal.serve import KafkaRunReader
from tests.helpers import loop_broker as L
from tests.helpers.harness import admit, executor_thread, plain_producer, sessions
from tests.helpers.known_runs import KnownRuns
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

TOKEN = "tok-ada-" + uuid.uuid4().hex
# The loop's last turn: long enough to watch, one token per event at PACE_S.
ANSWER = " ".join(f"tok{i}" for i in range(30))
PACE_S = 0.06
HOLD_S = 3.0
SLOW = L.call_key("order_status", {"order": "o-4"})  # the fifth turn's read

# Records every delta the page appends to a turn's text, in order, with when it came and
# whether the run's end was already shown: the page's own DOM is the witness.
WATCH = """() => {
  window.__appends = [];
  const list = document.getElementById("live-events");
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (n.nodeType === Node.TEXT_NODE && r.target.classList.contains("live-text")) {
          window.__appends.push({
            text: n.data,
            at: performance.now(),
            ended: !!list.querySelector('li[data-kind="ENDED"]'),
          });
        }
      }
    }
  }).observe(list, {childList: true, subtree: true});
}"""


@pytest.fixture(autouse=True)
def _no_python_tools_of_other_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the tools config's HTTP tools (as in the loop's broker tests)."""
    monkeypatch.setattr("runplane.providers._catalog.TOOLS", ToolRegistry())


@pytest.fixture
def ui(stack_settings: Settings) -> Iterator[tuple[str, KnownRuns]]:
    settings = stack_settings
    index = KnownRuns()
    readers = Principals.from_data(
        [{"name": "ada", "token_sha256": token_digest(TOKEN), "roles": [], "tenant": "acme"}]
    )
    app = build_api(
        lambda: index,  # type: ignore[arg-type,return-value]
        KafkaRunReader(settings),
        readers,
        stream=functools.partial(follow, settings),
    )
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", index
    stop.set()


def test_the_run_page_shows_a_streaming_loop_token_by_token_until_it_ends(
    stack_settings: Settings,
    ui: tuple[str, KnownRuns],
    chromium: Any,
    output_dir: Path,
    tmp_path: Path,
) -> None:
    settings = stack_settings
    base_url, index = ui
    # The loop's fifth turn reads one order slowly (HOLD_S, well within the tool's timeout): time
    # for the page to open and start watching before the last turn's answer streams.
    with (
        L.ToolServer(delay_s=HOLD_S) as tools,
        FakeOpenAIServer(model=scripted(*L.SCRIPT[:-1], ANSWER), chunk_delay_s=PACE_S) as model,
        FakeAnthropicServer() as claude,
    ):
        config = L.write_tools_config(
            tmp_path / "tools.yaml",
            tools_url=tools.url,
            openai_url=model.url,
            claude_url=claude.url,
        )
        tools.slow.add(SLOW)
        base = dataclasses.replace(settings, tools_config=str(config), agent_modules=())
        with executor_thread(ExecutorSettings(base=base, agent_modules=()), registry=L.AGENTS):
            [run] = admit(
                plain_producer(settings), settings, L.PROTOCOLS["openai"], [{"ticket": "t-1"}]
            )
            index.runs[run.run_id] = RunSummary(
                run.run_id, status=RunStatus.RUNNING, started_ms=run.admitted_ms, tenant="acme"
            )
            # The page opens once the run's first records are on the journal.
            wait_for(lambda: model.requests >= 1, timeout_s=60, what="the loop's first turn asked")

            page = chromium.new_page(viewport={"width": 1280, "height": 1100})
            page.goto(f"{base_url}/ui")
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_selector("text=Signed in as")
            page.goto(f"{base_url}/ui/runs/{run.run_id}")
            assert "RUNNING" in page.inner_text("dl.facts")
            page.wait_for_selector("#live-state.state-live")
            page.evaluate(WATCH)
            assert tools.answered[SLOW] == 0, "the page opened too late: the slow read is over"

            # Mid-stream: the last turn's answer has begun and the run has not ended.
            page.wait_for_function(
                "() => window.__appends.some(a => a.text.includes('tok5'))", timeout=120_000
            )
            assert page.locator('#live-events li[data-kind="ENDED"]').count() == 0
            page.screenshot(path=str(output_dir / "runs-ui-live-mid.png"), full_page=True)

            page.wait_for_selector('#live-events li[data-kind="ENDED"]', timeout=120_000)
            wait_for(
                lambda: (
                    getattr(sessions(settings).get(run.run_id), "status", None)
                    is RunStatus.COMPLETED
                ),
                timeout_s=60,
                what="the journal's completion",
            )
    page.screenshot(path=str(output_dir / "runs-ui-live-ended.png"), full_page=True)

    assert "ended: completed" in page.inner_text("#live-state")
    assert page.inner_text('#live-events li[data-kind="ENDED"]') == "■ completed"
    # Every turn, every call: proposed by the model, started and finished by the executor.
    turns = page.locator("#live-events li.turn")
    assert turns.count() == L.TURNS
    assert turns.nth(0).inner_text().startswith("── turn 1 · openai/fake-model")
    assert turns.nth(L.TURNS - 1).inner_text().startswith(f"── turn {L.TURNS} · ")
    proposed = page.locator('#live-events li[data-kind="TOOL_CALL_PROPOSED"]')
    assert proposed.count() == L.CALLS
    assert "→ proposes crm_lookup" in proposed.nth(0).inner_text()
    finished = page.locator('#live-events li[data-kind="TOOL_CALL_FINISHED"]')
    assert finished.count() == L.CALLS
    assert all(t.endswith(" ok") for t in finished.all_inner_texts())
    assert page.locator("#live-events li.turn").nth(L.TURNS - 1).inner_text().endswith(ANSWER)
    assert page.locator("li.superseded, li.restart").count() == 0  # nothing restarted

    # Token by token: the answer's deltas were appended one at a time as they came, the
    # first ones before the end was shown, spread over the model's pace (not one lump).
    appends: list[dict[str, Any]] = page.evaluate("() => window.__appends")
    answer = [a for a in appends if a["text"].strip().startswith("tok")]
    assert "".join(a["text"] for a in answer) == ANSWER
    assert len(answer) == len(ANSWER.split())
    assert not answer[0]["ended"] and not answer[-1]["ended"]
    assert answer[-1]["at"] - answer[0]["at"] >= 0.5 * PACE_S * 1000 * (len(answer) - 1)
    # The timeline is the journal's (rendered at load): the live panel never replaced it.
    assert page.locator("ol.timeline > li").count() >= 1
