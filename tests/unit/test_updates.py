"""Updates (issue 33, item 5) through the test Driver: a validator refuses before anything is
journaled, an accepted update is journaled and answered, an update id is handled once —
answered with the first answer, decided from the journal even after a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core import AgentRegistry, StepCtx, replay_history
from runplane.core.effect import EffectError
from runplane.core.updates import (
    QueryDecl,
    QueryFailed,
    Update,
    UpdateDecl,
    UpdateRefused,
    answer_query,
    refusal,
)
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus, UpdateAnswer

REGISTRY = AgentRegistry()


def check_item(payload: Any) -> str | None:
    if not isinstance(payload, dict) or not payload.get("sku"):
        return "an item names its sku"
    if payload.get("qty", 1) < 1:
        raise UpdateRefused("qty must be at least 1")
    return None


def items_of(state: Any, args: Any) -> Any:
    return [] if state is None else state["items"]


@REGISTRY.agent(
    "cart",
    updates=[UpdateDecl("add_item", validate=check_item), UpdateDecl("note")],
    queries=[QueryDecl("items", items_of)],
)
async def cart(ctx: StepCtx, input: Any) -> Any:
    items: list[str] = []
    if input.get("wait_first"):
        await ctx.wait_signal("open")
    while len(items) < input["max"]:
        update: Update = await ctx.wait_update("add_item")
        items.append(update.payload["sku"])
        await ctx.checkpoint({"items": items})
        await ctx.answer(update, {"count": len(items), "by": update.sent_by})
    return items


@REGISTRY.agent("twice", updates=[UpdateDecl("ask")])
async def twice(ctx: StepCtx, input: Any) -> Any:
    update = await ctx.wait_update("ask")
    await ctx.answer(update, "first")
    try:
        await ctx.answer(update, "second")
    except EffectError as exc:
        return exc.type
    return "answered twice"


@REGISTRY.agent("handled", updates=[UpdateDecl("double")])
async def handled(ctx: StepCtx, input: Any) -> Any:
    return await ctx.handle_update("double", lambda u: {"twice": u.payload * 2})


def _answer(answer: UpdateAnswer | None) -> Any:
    assert answer is not None and answer.refused is None, answer
    assert answer.answer_json is not None
    return json.loads(answer.answer_json)


def test_an_accepted_update_is_journaled_and_its_answer_sent() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 2})
    got = driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1", sent_by="alice")
    assert _answer(got) == {"count": 1, "by": "alice"}
    assert got is not None and got.session_id == run.session_id and got.name == "add_item"
    view = driver.view(run.session_id)
    received = [r for r in view.journal if r.kind is JournalKind.SIGNAL_RECEIVED]
    assert [r.attrs.get("signal_id") for r in received] == ["u-1"]
    answers = [r for r in view.journal if r.family == "answer"]
    assert [r.attrs.get("update_id") for r in answers] == ["u-1"]
    assert view.status is RunStatus.PARKED


def test_a_refused_update_leaves_no_record_and_says_why() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 2})
    before = driver.view(run.session_id)
    for payload, code, reason in [
        ({"qty": 1}, "invalid", "an item names its sku"),
        ({"sku": "A", "qty": 0}, "invalid", "qty must be at least 1"),
    ]:
        got = driver.update(run.session_id, "add_item", payload, update_id=f"bad-{reason}")
        assert got is not None and got.refused == code and got.reason == reason
        assert got.answer_json is None
    unknown = driver.update(run.session_id, "remove_item", {}, update_id="u-x")
    assert unknown is not None and unknown.refused == "unknown_update"
    after = driver.view(run.session_id)
    assert after.journal == before.journal and after.results == before.results
    assert after.snapshot.parts == before.snapshot.parts
    # A refused id is not remembered: the same id, now valid, is accepted.
    ok = driver.update(
        run.session_id, "add_item", {"sku": "B"}, update_id="bad-an item names its sku"
    )
    assert _answer(ok)["count"] == 1


def test_the_same_update_id_is_answered_with_the_first_answer_and_handled_once() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 3})
    first = _answer(driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1"))
    journal = driver.view(run.session_id).journal
    again = driver.update(run.session_id, "add_item", {"sku": "Z"}, update_id="u-1")
    assert _answer(again) == first == {"count": 1, "by": None}
    assert driver.view(run.session_id).journal == journal  # nothing handled, nothing journaled
    second = _answer(driver.update(run.session_id, "add_item", {"sku": "B"}, update_id="u-2"))
    assert second["count"] == 2


def test_a_duplicate_after_a_crash_is_answered_from_the_journal() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 3})
    first = _answer(driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1"))
    driver.crash(run.session_id)  # the resident runtime is gone; rebuilt from the journal
    again = driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1")
    assert _answer(again) == first
    assert driver.replayed > 0  # rebuilt by replay, not handled again
    items = [r for r in driver.view(run.session_id).journal if r.family == "answer"]
    assert len(items) == 1


def test_an_update_before_the_run_waits_is_buffered_and_answered_when_it_asks() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 1, "wait_first": True})
    assert driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1") is None
    # Still unanswered: a retry of the same id changes nothing and gets no answer yet.
    assert driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1") is None
    sent = len(driver.answers)
    view = driver.signal(run.session_id, "open")
    assert [_answer(a) for a in driver.answers[sent:]] == [{"count": 1, "by": None}]
    assert view.status is RunStatus.COMPLETED and view.output == ["A"]


def test_an_update_is_answered_once_even_if_the_agent_answers_again() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("twice", {})
    assert _answer(driver.update(run.session_id, "ask", None, update_id="q")) == "first"
    view = driver.view(run.session_id)
    assert view.status is RunStatus.COMPLETED and view.output == "UpdateNotOpen"
    assert [a.update_id for a in driver.answers] == ["q"]


def test_handle_update_waits_handles_and_answers() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("handled", {})
    assert _answer(driver.update(run.session_id, "double", 21, update_id="d")) == {"twice": 42}
    assert driver.view(run.session_id).output == {"twice": 42}


def test_the_journal_of_updates_replays_identically() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 2})
    driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1")
    driver.update(run.session_id, "add_item", {"bad": 1}, update_id="u-bad")
    view = driver.update(run.session_id, "add_item", {"sku": "B"}, update_id="u-2")
    assert view is not None
    final = driver.view(run.session_id)
    assert final.status is RunStatus.COMPLETED
    report = replay_history(REGISTRY.spec("cart"), final.snapshot, final.results)
    assert report.divergence is None and report.output == ["A", "B"]


def test_an_update_payload_is_untrusted_at_the_source() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 2})
    driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1", sent_by="mallory")
    entries = [e for e in driver.view(run.session_id).results.values() if e.family == "update"]
    assert len(entries) == 1 and entries[0].label.trust.value == "UNTRUSTED"
    assert "principal/mallory" in entries[0].label.provenance


def test_wait_update_needs_a_declared_update() -> None:
    registry = AgentRegistry()

    @registry.agent("undeclared")
    async def undeclared(ctx: StepCtx, input: Any) -> Any:
        return await ctx.wait_update("nope")

    view = Driver(registry).run("undeclared", {})
    assert view.status is RunStatus.FAILED and "declares no update 'nope'" in (view.error or "")


def test_declarations_refuse_bad_names_and_duplicates() -> None:
    with pytest.raises(ValueError, match="name"):
        UpdateDecl("runplane.cancel")
    with pytest.raises(ValueError, match="name"):
        QueryDecl("a/b", items_of)
    with pytest.raises(ValueError, match="declared twice"):
        AgentRegistry().agent("dup", updates=[UpdateDecl("x"), UpdateDecl("x")])(cart)


def test_a_validator_that_crashes_refuses_instead() -> None:
    def broken(payload: Any) -> str | None:
        raise KeyError("sku")

    code, reason = refusal(UpdateDecl("x", validate=broken), "x", {}) or ("", "")
    assert code == "invalid" and "KeyError" in reason


def test_queries_answer_from_the_state_and_name_their_failures() -> None:
    decl = QueryDecl("items", items_of)
    assert answer_query(decl, "items", {"items": ["A"]}, None) == ["A"]
    assert answer_query(decl, "items", None, None) == []
    with pytest.raises(QueryFailed) as unknown:
        answer_query(None, "nope", None, None)
    assert unknown.value.code == "unknown_query"
    with pytest.raises(QueryFailed) as failed:
        answer_query(QueryDecl("bad", lambda s, a: s["missing"]), "bad", {}, None)
    assert failed.value.code == "query_failed" and "KeyError" in failed.value.reason


_ACTIONS = st.lists(
    st.tuples(st.sampled_from(["u-1", "u-2", "u-3", "u-4"]), st.booleans()), max_size=12
)


@settings(max_examples=40, deadline=None)
@given(actions=_ACTIONS, crash_at=st.integers(min_value=-1, max_value=12))
def test_each_update_id_is_handled_at_most_once_and_answered_alike(
    actions: list[tuple[str, bool]], crash_at: int
) -> None:
    """Any sequence of valid and invalid updates under a few ids, a crash anywhere: an id is
    handled once (one answer record), every answer to it is the same, a refusal is never
    journaled, and what was handled is exactly the ids first sent valid."""
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 100})
    sid = run.session_id
    answers: dict[str, list[Any]] = {}
    handled: list[str] = []
    for i, (update_id, valid) in enumerate(actions):
        if i == crash_at:
            driver.crash(sid)
        before = len(driver.view(sid).journal)
        payload = {"sku": update_id} if valid else {"qty": 1}
        got = driver.update(sid, "add_item", payload, update_id=update_id)
        assert got is not None
        if got.refused is not None:
            assert update_id not in handled
            assert len(driver.view(sid).journal) == before  # refused: nothing journaled
            continue
        if update_id not in handled:
            handled.append(update_id)
        answers.setdefault(update_id, []).append(_answer(got))
    for update_id, given_answers in answers.items():
        assert all(a == given_answers[0] for a in given_answers)
        assert given_answers[0]["count"] == handled.index(update_id) + 1
    records = [r for r in driver.view(sid).journal if r.family == "answer"]
    assert [r.attrs["update_id"] for r in records] == handled


def test_updates_left_unanswered_are_answered_ended_when_the_run_ends() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 1, "wait_first": True})
    assert driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1") is None
    view = driver.cancel(run.session_id, "customer left")
    assert view.status is RunStatus.FAILED
    [ended] = [a for a in driver.answers if a.update_id == "u-1"]
    assert ended.refused == "ended" and ended.name == "add_item"
    assert ended.reason is not None and "before answering" in ended.reason


def test_an_answered_update_is_not_answered_again_when_the_run_ends() -> None:
    driver = Driver(REGISTRY)
    run = driver.run("cart", {"max": 1})
    driver.update(run.session_id, "add_item", {"sku": "A"}, update_id="u-1")
    assert driver.view(run.session_id).status is RunStatus.COMPLETED
    assert [(a.update_id, a.refused) for a in driver.answers] == [("u-1", None)]
