"""Who may read bodies through the journal API: principals with the role ``auditor``.

Everything else — the principals file and its format (hashed tokens, roles), re-reading it
when it changes, constant-time authentication, the 401/403 answers — is ``runplane.auth``,
shared with the worklist. The journal reads ``RUNPLANE_JOURNAL_READERS_FILE`` if set, else the
worklist's ``RUNPLANE_WORKLIST_PRINCIPALS_FILE`` (see ``settings.py``). Identity comes from the
bearer token only, never from a request body or parameter.
"""

from __future__ import annotations

from runplane.auth import Principal, PrincipalSource, require_principal

AUDITOR = "auditor"

__all__ = ["AUDITOR", "body_reader"]


def body_reader(principals: PrincipalSource, authorization: str | None) -> Principal:
    """The auditor presenting ``authorization``: 401 without a known bearer token, 403 for a
    principal without the role ``auditor``."""
    return require_principal(principals, authorization, role=AUDITOR, purpose="read bodies")
