"""The Kafka ACLs each principal of the platform needs, as data (docs/security.md's tables).

``grants(role, prefix)`` is pure: which topics a role reads and writes, which consumer groups
it reads, which transactional ids it writes. ``bindings`` turns them into confluent-kafka
``AclBinding``s for ``AdminClient.create_acls`` (``runplane acls apply``); the same table is
printed as ``kafka-acls.sh`` lines for operators who apply ACLs by hand (``runplane acls
print``). The services' topologies and docs/security.md are checked against this table by
``tests/unit/test_acls.py``, so the three cannot drift.

An authorization failure at run time is named by ``authorization_hint``: the service stops
with the operation it was refused and the command that grants it, instead of a bare error code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError

# Public names of confluent_kafka.admin that its stubs do not re-export.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

__all__ = [
    "ACCESS",
    "AUTHORIZATION_CODES",
    "Access",
    "Grant",
    "Pattern",
    "Resource",
    "authorization_hint",
    "bindings",
    "grants",
    "kafka_acls_lines",
]


class Resource(Enum):
    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"


class Pattern(Enum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


@dataclass(frozen=True)
class Grant:
    """One ALLOW rule: ``operation`` on the resource ``name`` (literal or prefixed)."""

    resource: Resource
    name: str
    pattern: Pattern
    operation: str  # READ, WRITE, DESCRIBE, CREATE, DESCRIBE_CONFIGS

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a grant names a resource")
        if self.operation not in _OPERATIONS:
            raise ValueError(f"unknown operation {self.operation!r}")


@dataclass(frozen=True)
class Access:
    """What one role touches. Names without the deployment prefix; ``groups`` and
    ``txn_prefix`` are deployment-prefixed, ``shared_groups`` are not (random per process)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()  # literal, P<name>
    prefixed_groups: tuple[str, ...] = ()  # prefixed, P<name>
    shared_groups: tuple[str, ...] = ()  # prefixed, not deployment-prefixed
    txn_prefix: str | None = None  # transactional ids P<txn_prefix>-…
    admin: bool = False  # creates and describes the topics


_RESTORE = "runplane-restore-"

# docs/security.md "Topics: who reads (R) and who writes (W)" and "Groups and transactional ids".
ACCESS: dict[str, Access] = {
    "admission": Access(
        # sessions: POST /runs/{run}/signals|cancel|updates check the run first
        # (runplane.runs.operate); runs.updates: POST /runs/{run}/updates waits for the answer.
        reads=("admission", "admission.claims", "admission.replies", "sessions", "runs.updates"),
        writes=("admission", "admission.claims", "admission.replies", "runs.inbox", "journal",
                "deadletter"),
        groups=("admission",),
        shared_groups=(_RESTORE, "runplane-client-"),
        txn_prefix="admission",
    ),
    "executor": Access(
        reads=("runs.inbox", "results", "sessions"),
        # runs.inbox: a continue-as-new successor's StartRun.
        writes=("admission", "journal", "results", "sessions", "cases.commands", "tasks.commands",
                "deadletter", "runs.inbox", "runs.stream", "runs.updates"),  # runs.inbox: a successor's StartRun, a child's result; runs.updates: answers to updates
        groups=("executor",),
        shared_groups=(_RESTORE,),
        txn_prefix="executor",
    ),
    "cases": Access(
        reads=("cases.commands", "cases"),
        writes=("admission", "runs.inbox", "journal", "cases", "tasks.commands", "deadletter"),
        groups=("cases",),
        shared_groups=(_RESTORE,),
        txn_prefix="cases",
    ),
    "sweeper": Access(
        # schedules: fired to admission, progress on schedules.fired, answers from replies.
        reads=("cases", "schedules", "schedules.fired", "admission.replies"),
        writes=("cases.commands", "deadletter", "admission", "schedules.fired"),
        groups=("sweeper",),
        prefixed_groups=("sweeper-committed-",),
    ),
    "worklist": Access(
        # runs.stream: the task page's calls proposed as they arrive (runplane.runs.stream)
        reads=("tasks.commands", "tasks", "runs.stream"),
        writes=("tasks.commands", "tasks", "runs.inbox", "deadletter"),
        groups=("worklist",),
        shared_groups=(_RESTORE, "runplane-worklist-reader-", "runplane-reader-"),
        txn_prefix="worklist",
    ),
    "journal": Access(
        reads=("journal", "results", "audit", "sessions", "cases", "runs.stream"),
        # journal/results/sessions: an operator's fork (runplane.runs.repair.write_fork);
        # cases: a run's case on the runs UI's run page (runplane.runs.read.read_case)
        writes=("audit", "runs.inbox", "deadletter", "journal", "results", "sessions"),
        groups=("runplane-journal",),
        shared_groups=(_RESTORE, "runplane-indexer-", "runplane-reader-"),
        txn_prefix="journal",
    ),
    "emitter": Access(
        reads=("admission.replies", "sessions", "runs.stream", "runs.updates"),
        writes=("admission",),
        shared_groups=("runplane-client-",),
    ),
    # runplane signal / runs cancel: check the run (sessions, admission.claims), then write;
    # runplane cases close: the CloseCase command; runplane schedules: the schedules table.
    "operator": Access(
        # runplane schedules: the operators write schedules; list reads both tables.
        # runs.updates: `runplane runs update` on Kafka (dev mode) waits for its answer.
        reads=("cases", "sessions", "admission.claims", "schedules", "schedules.fired",
               "runs.updates"),
        writes=("runs.inbox", "cases.commands", "schedules"),
        shared_groups=("runplane-cli-", "runplane-client-"),
    ),
    # The chart's upgrade gate (`runplane replay --from-kafka`): the sessions table, then each
    # sampled run's journal and results.
    "gate": Access(reads=("sessions", "journal", "results"), shared_groups=(_RESTORE, "runplane-reader-")),
    "admin": Access(admin=True),
}  # fmt: skip

_OPERATIONS = ("READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS")


def grants(role: str, prefix: str) -> tuple[Grant, ...]:
    """The ALLOW rules of ``role`` in the deployment whose topics start with ``prefix``."""
    try:
        access = ACCESS[role]
    except KeyError:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ACCESS)}") from None
    out: list[Grant] = []
    topic = Resource.TOPIC
    for name in access.reads:
        out.append(Grant(topic, prefix + name, Pattern.LITERAL, "READ"))
    for name in access.writes:
        out.append(Grant(topic, prefix + name, Pattern.LITERAL, "WRITE"))
    for name in access.groups:
        out.append(Grant(Resource.GROUP, prefix + name, Pattern.LITERAL, "READ"))
    for name in access.prefixed_groups:
        out.append(Grant(Resource.GROUP, prefix + name, Pattern.PREFIXED, "READ"))
    for name in access.shared_groups:
        out.append(Grant(Resource.GROUP, name, Pattern.PREFIXED, "READ"))
    if access.txn_prefix is not None:
        for op in ("WRITE", "DESCRIBE"):
            txn = f"{prefix}{access.txn_prefix}-"
            out.append(Grant(Resource.TRANSACTIONAL_ID, txn, Pattern.PREFIXED, op))
    if access.admin:
        for op in ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"):
            out.append(Grant(topic, prefix, Pattern.PREFIXED, op))
    return tuple(out)


_RESOURCE = {
    Resource.TOPIC: ResourceType.TOPIC,
    Resource.GROUP: ResourceType.GROUP,
    Resource.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
}
_PATTERN = {
    Pattern.LITERAL: ResourcePatternType.LITERAL,
    Pattern.PREFIXED: ResourcePatternType.PREFIXED,
}


def bindings(principal: str, rules: tuple[Grant, ...]) -> list[AclBinding]:
    """``rules`` for ``principal`` (``User:runplane-executor``) as AdminClient bindings."""
    if ":" not in principal:
        raise ValueError(f"a principal is TYPE:NAME (User:runplane-executor), got {principal!r}")
    return [
        AclBinding(
            _RESOURCE[g.resource],
            g.name,
            _PATTERN[g.pattern],
            principal,
            "*",
            AclOperation[g.operation],
            AclPermissionType.ALLOW,
        )
        for g in rules
    ]


def kafka_acls_lines(principal: str, rules: tuple[Grant, ...]) -> list[str]:
    """``rules`` as arguments of Kafka's ``kafka-acls.sh --add`` (one rule per line)."""
    flag = {
        Resource.TOPIC: "--topic",
        Resource.GROUP: "--group",
        Resource.TRANSACTIONAL_ID: "--transactional-id",
    }
    op_name = {"DESCRIBE_CONFIGS": "DescribeConfigs"}
    return [
        f"--allow-principal {principal} --operation {op_name.get(g.operation, g.operation.title())} "
        f"--resource-pattern-type {g.pattern.value} {flag[g.resource]} {g.name}"
        for g in rules
    ]


_AUTHZ_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "a topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "its consumer group",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "its transactional id",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "the cluster",
}


AUTHORIZATION_CODES = frozenset(_AUTHZ_CODES)


def authorization_hint(code: int, role: str | None = None) -> str | None:
    """What to tell an operator when the broker refused ``role`` (None: not an authz error)."""
    what = _AUTHZ_CODES.get(code)
    if what is None:
        return None
    whose = f"the {role} role" if role else "this service's role"
    name = role or "ROLE"
    return (
        f"the broker refused this principal access to {what}: grant the ACLs of {whose} "
        f"(docs/security.md; `runplane acls print {name}` or `runplane acls apply {name} "
        "--principal User:…`)"
    )
