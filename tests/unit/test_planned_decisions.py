"""The planned loop's pure decisions (``core.plannedloop``): reading the planner's answer, the
planned rules, and reading a quarantined turn's answer as its typed fields."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core.canonical import canonical_json
from runplane.core.plan import Bind, Const, Contract, Node, Plan, PlanInvalid
from runplane.core.plannedloop import (
    FIELD_TYPES,
    MAX_STRING,
    QuarantineInvalid,
    planner_messages,
    problems,
    read_plan,
    typed,
)
from runplane.wire import Label, Sensitivity, Trust

TRUSTED = Label(
    trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("input:admission",)
)
UNTRUSTED = Label(
    trust=Trust.UNTRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("tool://fetch_document",)
)
CONTRACT = Contract(
    tools=frozenset({"crm_lookup", "fetch_document", "refund"}),
    models=frozenset({"scripted/m"}),
    sinks=frozenset({"refund"}),
)
FIELDS = {"order": "string", "amount_eur": "number"}


def _plan(*extra: Node, claim_args: dict[str, Any] | None = None) -> Plan:
    claim = claim_args or {"prompt": Bind("doc", "$.text"), "schema": Const(FIELDS)}
    return Plan(
        "p",
        (
            Node("crm", "tool:crm_lookup", {"customer_id": Bind("input", "$.customer_id")}),
            Node("doc", "tool:fetch_document", {"document_id": Const("d-9")}),
            Node("claim", "model:scripted/m", claim),
            Node(
                "pay",
                "tool:refund",
                {"recipient": Bind("crm", "$.account"), "order": Bind("claim", "$.order")},
                sink=True,
            ),
            *extra,
        ),
    )


INPUT = {"customer_id": "c-1"}


def test_a_well_formed_plan_from_a_trusted_planner_has_no_problem() -> None:
    assert problems(_plan(), CONTRACT, INPUT, TRUSTED) == []


def test_a_planner_that_read_anything_untrusted_makes_every_literal_and_input_binding_a_problem() -> (
    None
):
    found = problems(_plan(), CONTRACT, INPUT, UNTRUSTED)
    positions = sorted(p.position for p in found)
    # the literal d-9, the input binding, the quarantined turn's schema literal
    assert positions == [
        "nodes.claim.args.schema",
        "nodes.crm.args.customer_id",
        "nodes.doc.args.document_id",
    ]
    assert all("trusted input only" in p.message for p in found)


def test_a_quarantined_turn_takes_exactly_a_prompt_and_a_typed_schema() -> None:
    extra = problems(
        _plan(claim_args={"prompt": Const("x"), "schema": Const(FIELDS), "tools": Const([])}),
        CONTRACT,
        INPUT,
        TRUSTED,
    )
    assert [p.position for p in extra] == ["nodes.claim.args"]
    bound_schema = problems(
        _plan(claim_args={"prompt": Const("x"), "schema": Bind("doc", "$.schema")}),
        CONTRACT,
        INPUT,
        TRUSTED,
    )
    assert "nodes.claim.args.schema" in [p.position for p in bound_schema]
    nested = problems(
        _plan(claim_args={"prompt": Const("x"), "schema": Const({"order": {"type": "object"}})}),
        CONTRACT,
        INPUT,
        TRUSTED,
    )
    assert "nodes.claim.args.schema" in [p.position for p in nested]


@pytest.mark.parametrize("path", ["$", "$.recipient", "$.order.id"])
def test_a_binding_to_a_quarantined_turn_names_one_declared_field(path: str) -> None:
    note = Node("note", "tool:refund", {"recipient": Bind("claim", path)}, sink=True)
    found = problems(_plan(note), CONTRACT, INPUT, TRUSTED)
    assert [p.position for p in found] == ["nodes.note.args.recipient"]


def test_the_contract_of_the_offered_tools_and_model_still_applies() -> None:
    other = Node("x", "tool:send_mail", {"to": Const("a@b")})
    agent = Node("y", "agent:helper", {})
    model = Node("z", "model:openai/gpt", {"prompt": Const("p"), "schema": Const(FIELDS)})
    found = {p.position for p in problems(_plan(other, agent, model), CONTRACT, INPUT, TRUSTED)}
    assert {"nodes.x.call", "nodes.y.call", "nodes.z.call"} <= found


def test_the_planner_is_shown_the_instructions_the_vocabulary_and_the_input_alone() -> None:
    spec = {"name": "crm_lookup", "description": "d", "parameters": {"type": "object"}}
    system, user = planner_messages("Be careful.", INPUT, [spec], "scripted/m")
    assert system.content.startswith("Be careful.")
    assert canonical_json([spec]) in system.content and '"model:scripted/m"' in system.content
    assert user.content == canonical_json(INPUT)


_ids = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda s: s != "input")
_scalars = st.one_of(st.integers(-1000, 1000), st.text(max_size=12), st.booleans(), st.none())


@given(st.lists(_ids, min_size=1, max_size=5, unique=True), st.data())
def test_any_plan_reads_back_from_its_json_with_the_same_hash(ids: list[str], data: Any) -> None:
    nodes = []
    for i, node_id in enumerate(ids):
        args: dict[str, Any] = {"a": Const(data.draw(_scalars))}
        if i:
            args["b"] = Bind(ids[data.draw(st.integers(0, i - 1))], "$.x")
        nodes.append(Node(node_id, "tool:crm_lookup", args))
    plan = Plan("p", tuple(nodes))
    text = canonical_json(plan.to_json())
    assert read_plan(text).hash == plan.hash
    assert read_plan(f"```json\n{text}\n```").hash == plan.hash


@pytest.mark.parametrize("text", ["", "refund the customer", "[1, 2]", '{"name": "p"}'])
def test_an_answer_that_is_no_plan_is_a_named_error(text: str) -> None:
    with pytest.raises(PlanInvalid):
        read_plan(text)


_fields = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.sampled_from(FIELD_TYPES), min_size=1
)


def _value(kind: str) -> st.SearchStrategy[Any]:
    return {
        "string": st.text(max_size=MAX_STRING),
        "number": st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False)),
        "integer": st.integers(),
        "boolean": st.booleans(),
    }[kind]


def _answer(value: Any) -> dict[str, Any]:
    return {"text": canonical_json(value)}


@given(_fields, st.data())
def test_an_answer_of_exactly_the_declared_fields_and_types_reads(
    fields: dict[str, str], data: Any
) -> None:
    value = {name: data.draw(_value(kind)) for name, kind in fields.items()}
    assert canonical_json(typed(_answer(value), fields)) == canonical_json(value)


@given(_fields, st.data())
def test_a_field_of_another_type_does_not_read(fields: dict[str, str], data: Any) -> None:
    value = {name: data.draw(_value(kind)) for name, kind in fields.items()}
    name = data.draw(st.sampled_from(sorted(fields)))
    wrong = {"string": 5, "number": "5", "integer": 1.5, "boolean": 0}[fields[name]]
    with pytest.raises(QuarantineInvalid):
        typed(_answer({**value, name: wrong}), fields)


@given(_fields, st.data())
def test_a_missing_or_extra_field_does_not_read(fields: dict[str, str], data: Any) -> None:
    value = {name: data.draw(_value(kind)) for name, kind in fields.items()}
    with pytest.raises(QuarantineInvalid):
        typed(_answer({**value, "zz_extra": 1}), fields)
    dropped = dict(value)
    dropped.pop(data.draw(st.sampled_from(sorted(fields))))
    with pytest.raises(QuarantineInvalid):
        typed(_answer(dropped), fields)


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "the order is o-1"},
        {"text": '["o-1", 40]'},
        {"text": canonical_json({"order": "o-1", "amount_eur": True})},
        {"text": canonical_json({"order": "x" * (MAX_STRING + 1), "amount_eur": 1})},
        {
            "text": canonical_json({"order": "o-1", "amount_eur": 1}),
            "tool_calls": [{"id": "c", "name": "refund", "arguments": {}}],
        },
        "not a generation",
    ],
)
def test_a_quarantined_answer_that_is_not_its_typed_object_is_a_named_error(answer: Any) -> None:
    with pytest.raises(QuarantineInvalid):
        typed(answer, FIELDS)
