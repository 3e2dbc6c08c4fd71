"""The ACL table (runplane.kafka.acls) agrees with the services' topologies and with
docs/security.md, so the ACLs an operator applies are the ones the services need."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from runplane.kafka.acls import (
    ACCESS,
    Grant,
    Pattern,
    Resource,
    authorization_hint,
    bindings,
    grants,
    kafka_acls_lines,
)
from services.admission import topology as admission
from services.cases import topology as cases
from services.executor import topology as executor
from services.journal import topology as journal
from services.queues import topology as queues
from services.sweeper import topology as sweeper
from services.worklist import topology as worklist

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
COLUMNS = (
    "admission",
    "executor",
    "cases",
    "sweeper",
    "worklist",
    "journal",
    "queues",
    "emitter",
    "operator",
)


def _doc_table() -> dict[str, tuple[set[str], set[str]]]:
    """role -> (reads, writes) from the "Topics: who reads (R) and who writes (W)" table."""
    text = DOC.read_text()
    section = text.split("### Topics: who reads (R) and who writes (W)", 1)[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, tuple[set[str], set[str]]] = {c: (set(), set()) for c in COLUMNS}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        topic = cells[0].strip("`")
        for role, cell in zip(COLUMNS, cells[1:], strict=True):
            marks = re.sub(r"\(.*?\)", "", cell).split()
            if "R" in marks:
                table[role][0].add(topic)
            if "W" in marks:
                table[role][1].add(topic)
    return table


@pytest.mark.parametrize("role", COLUMNS)
def test_the_table_is_the_documented_one(role: str) -> None:
    reads, writes = _doc_table()[role]
    access = ACCESS[role]
    assert set(access.reads) == reads
    assert set(access.writes) == writes


def _doc_groups() -> dict[str, tuple[set[str], str | None]]:
    """role -> (groups, transactional id prefix) from "Groups and transactional ids"."""
    section = DOC.read_text().split("### Groups and transactional ids", 1)[1].split("\n\n")[1]
    out: dict[str, tuple[set[str], str | None]] = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        match = re.fullmatch(r"`runplane-(\w+)`", cells[0])
        if match is None or match.group(1) == "admin":
            continue
        named = re.sub(r"\(.*?\)", "", cells[1])  # "(`POST /admit` waits …)" is prose
        groups = set(re.findall(r"`([^`]+)`", named))
        txn = re.findall(r"`P(\w+)-`", cells[2])
        out[match.group(1)] = (groups, txn[0] if txn else None)
    return out


@pytest.mark.parametrize(
    "role", ["admission", "executor", "cases", "sweeper", "worklist", "journal", "queues"]
)
def test_the_groups_and_transactional_ids_are_the_documented_ones(role: str) -> None:
    groups, txn = _doc_groups()[role]
    access = ACCESS[role]
    ours = {f"P{g}" for g in (*access.groups, *access.prefixed_groups)} | set(access.shared_groups)
    assert ours == groups
    assert access.txn_prefix == txn


@pytest.mark.parametrize(
    ("role", "inputs", "outputs", "tables"),
    [
        ("admission", {admission.INPUT}, set(admission.OUTPUTS), set(admission.TABLES.values())),
        ("executor", {executor.INPUT}, set(executor.OUTPUTS), set(executor.TABLES)),
        ("cases", {cases.INPUT}, set(cases.OUTPUTS), set(cases.TABLES.values())),
        ("worklist", {worklist.INPUT}, set(worklist.OUTPUTS), set(worklist.TABLES.values())),
        ("journal", set(journal.INPUTS), set(journal.OUTPUTS), set()),
        ("queues", {queues.INPUT}, set(queues.OUTPUTS), set(queues.TABLES.values())),
        ("sweeper", {sweeper.INPUT}, {sweeper.OUTPUT, sweeper.DEADLETTER}, set()),
    ],
)
def test_each_service_may_read_its_inputs_and_tables_and_write_its_outputs(
    role: str, inputs: set[str], outputs: set[str], tables: set[str]
) -> None:
    access = ACCESS[role]
    assert inputs | tables <= set(access.reads)
    assert outputs | tables <= set(access.writes)


def test_transactional_services_may_use_their_ids_and_groups() -> None:
    rules = grants("executor", "acme.")
    assert Grant(Resource.TRANSACTIONAL_ID, "acme.executor-", Pattern.PREFIXED, "WRITE") in rules
    assert Grant(Resource.TRANSACTIONAL_ID, "acme.executor-", Pattern.PREFIXED, "DESCRIBE") in rules
    assert Grant(Resource.GROUP, "acme.executor", Pattern.LITERAL, "READ") in rules
    assert not any(g.resource is Resource.TRANSACTIONAL_ID for g in grants("sweeper", "acme."))


@given(prefix=st.from_regex(r"[a-z]{1,8}\.", fullmatch=True), role=st.sampled_from(list(ACCESS)))
def test_every_topic_rule_stays_inside_the_deployment(prefix: str, role: str) -> None:
    for g in grants(role, prefix):
        if g.resource is not Resource.GROUP:
            assert g.name.startswith(prefix)


def test_bindings_and_lines_name_the_principal() -> None:
    rules = grants("worklist", "runplane.")
    assert len(bindings("User:w", rules)) == len(rules)
    lines = kafka_acls_lines("User:w", rules)
    assert (
        "--allow-principal User:w --operation Write --resource-pattern-type prefixed "
        "--transactional-id runplane.worklist-" in lines
    )
    with pytest.raises(ValueError, match="TYPE:NAME"):
        bindings("w", rules)
    with pytest.raises(ValueError, match="unknown role"):
        grants("nobody", "runplane.")


def test_an_authorization_error_says_what_to_grant() -> None:
    hint = authorization_hint(KafkaError.GROUP_AUTHORIZATION_FAILED, "executor")
    assert hint is not None and "consumer group" in hint and "runplane acls print executor" in hint
    assert authorization_hint(KafkaError._TIMED_OUT) is None
