"""The journal service's topics and group.

In: ``journal`` and ``results`` (read_committed, one group, range assignment so partition *p*
of both lands on the same instance — they are co-partitioned by session).
Out: ``audit`` (one AuditRecord per journal record, on the record's partition), ``runs.inbox``
(a Wake ``quarantine:…`` for a run whose chain broke; an operator's repair order), ``deadletter``,
and for an operator's fork (``runplane.runs.repair.write_fork``) the new run's ``journal`` prefix,
its copied ``results`` and its first ``sessions`` snapshot.
The run index reads ``audit`` back (every partition, no group) into Redis.
"""

from __future__ import annotations

SERVICE = "journal"
GROUP_ID = "runplane-journal"
INPUTS = ("journal", "results")
AUDIT = "audit"
INBOX = "runs.inbox"
DEADLETTER = "deadletter"
FORK_OUTPUTS = ("journal", "results", "sessions")
OUTPUTS = (AUDIT, INBOX, DEADLETTER, *FORK_OUTPUTS)
