"""Who may read bodies through the journal API: principals with the role ``auditor``.

The principals file, its format (hashed tokens, roles) and constant-time authentication are
shared with the worklist (``runplane.auth``): the journal reads ``RUNPLANE_JOURNAL_READERS_FILE``
if set, else the worklist's ``RUNPLANE_WORKLIST_PRINCIPALS_FILE`` (see ``settings.py``).
Identity comes from the bearer token only, never from a request body or parameter.
"""

from __future__ import annotations

from runplane.auth import Principal, bearer_token, token_digest
from runplane.auth import Principals as Readers

AUDITOR = "auditor"

__all__ = ["AUDITOR", "Principal", "Readers", "bearer_token", "token_digest"]
