"""The journal service's settings: one frozen object, built once from ``RUNPLANE_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runplane.config import Settings, env_bool, env_int, env_str
from runplane.errors import ConfigError
from runplane.signing.journal import Keyring, Signer
from runplane.web import public_origin


@dataclass(frozen=True)
class JournalSettings:
    """What the journal service reads from its environment.

    ``body_grace_ms`` (``RUNPLANE_JOURNAL_BODY_GRACE_MS``): how long a record whose body has not
    been read waits — with the results partition at its end — before it is BODY_MISSING (see
    ``decide.py`` for why that bound is sound). ``batch_max``/``batch_ms`` bound one audit
    transaction; ``max_hold_ms`` bounds how long a transaction stays open while records wait
    for bodies (journal intake pauses past it, so a transaction never outgrows its timeout).
    ``readers_file``: who may read bodies (``RUNPLANE_JOURNAL_READERS_FILE``, else the
    worklist's ``RUNPLANE_WORKLIST_PRINCIPALS_FILE``; principals with the role ``auditor``).
    ``max_scans`` (``RUNPLANE_JOURNAL_MAX_SCANS``, default 4): how many API reads of a run's
    partitions (journal, verify) run at once; one more is answered 503 with Retry-After.
    """

    base: Settings = field(default_factory=Settings)
    body_grace_ms: int = 5_000
    batch_max: int = 500
    batch_ms: int = 20
    max_hold_ms: int = 15_000
    readers_file: Path | None = None
    index: bool = True
    transaction_timeout_ms: int = 60_000
    session_timeout_ms: int = 10_000
    max_scans: int = 4
    # The address people reach the runs UI at (RUNPLANE_JOURNAL_PUBLIC_ORIGIN, as the
    # worklist's): its form posts are checked against it behind a TLS-terminating ingress.
    public_origin: str | None = None
    # Where the worklist's pages are (RUNPLANE_JOURNAL_WORKLIST_UI, an origin, as the worklist's
    # RUNPLANE_WORKLIST_RUNS_UI is the other way): a run waiting on a task links its task page
    # there. None: the task id is shown without a link.
    worklist_ui: str | None = None
    # The chain writers' public keys (RUNPLANE_JOURNAL_PUBLIC_KEYS, runplane.signing.journal): with
    # them, a journal record not signed by one of them is a break (bad_signature).
    keyring: Keyring | None = None
    # The key an operator's fork signs its journal records with (RUNPLANE_JOURNAL_SIGNING_KEY):
    # the journal service writes a fork's chain, so it is a chain writer for those records.
    journal_signer: Signer | None = None

    def __post_init__(self) -> None:
        if self.max_scans < 1:
            raise ConfigError("RUNPLANE_JOURNAL_MAX_SCANS must be at least 1")
        if self.body_grace_ms < 0:
            raise ConfigError("RUNPLANE_JOURNAL_BODY_GRACE_MS must not be negative")
        if self.batch_max < 1 or self.batch_ms < 0:
            raise ConfigError(
                "RUNPLANE_JOURNAL_BATCH_MAX must be >= 1 and RUNPLANE_JOURNAL_BATCH_MS >= 0"
            )
        if self.max_hold_ms < self.body_grace_ms:
            raise ConfigError("RUNPLANE_JOURNAL_MAX_HOLD_MS must be at least the body grace")
        if self.max_hold_ms * 2 > self.transaction_timeout_ms:
            raise ConfigError(
                "RUNPLANE_JOURNAL_MAX_HOLD_MS must be under half the transaction timeout"
            )

    @property
    def transactional_id(self) -> str:
        """Stable per instance: a restarted instance fences and aborts its predecessor.

        Prefixed with the topic prefix: transactional ids are cluster-wide, and two deployments
        sharing a Kafka must not fence each other."""
        return f"{self.base.topic_prefix}journal-{self.base.instance_id}"

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> JournalSettings:
        e = os.environ if env is None else env
        readers = env_str(e, "RUNPLANE_JOURNAL_READERS_FILE") or env_str(
            e, "RUNPLANE_WORKLIST_PRINCIPALS_FILE"
        )
        return cls(
            base=base or Settings.from_env(e),
            body_grace_ms=env_int(e, "RUNPLANE_JOURNAL_BODY_GRACE_MS", 5_000),
            batch_max=env_int(e, "RUNPLANE_JOURNAL_BATCH_MAX", 500),
            batch_ms=env_int(e, "RUNPLANE_JOURNAL_BATCH_MS", 20),
            max_hold_ms=env_int(e, "RUNPLANE_JOURNAL_MAX_HOLD_MS", 15_000),
            readers_file=Path(readers) if readers else None,
            index=env_bool(e, "RUNPLANE_JOURNAL_INDEX", True),
            max_scans=env_int(e, "RUNPLANE_JOURNAL_MAX_SCANS", 4),
            keyring=Keyring.from_env(e),
            journal_signer=Signer.from_env(e),
            public_origin=public_origin(
                e.get("RUNPLANE_JOURNAL_PUBLIC_ORIGIN"), "RUNPLANE_JOURNAL_PUBLIC_ORIGIN"
            ),
            worklist_ui=public_origin(
                e.get("RUNPLANE_JOURNAL_WORKLIST_UI"), "RUNPLANE_JOURNAL_WORKLIST_UI"
            ),
        )
