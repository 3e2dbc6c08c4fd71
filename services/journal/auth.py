"""Who may query runs through the journal API, and who may read bodies.

Two rules on top of ``runplane.serving.auth``:

- every run endpoint (``/runs``, ``/runs/{id}``, ``/journal``, ``/verify``) needs a valid
  bearer token — any configured principal, whatever its roles (401 without one): run ids,
  capabilities, cases and costs are not public;
- bodies (``/journal?bodies=true``) need the role ``auditor`` on top (403 without it).

Everything else — the principals file and its format (hashed tokens, roles), re-reading it
when it changes, constant-time authentication, the 401/403 answers — is ``runplane.serving.auth``,
shared with the worklist. The journal reads ``RUNPLANE_JOURNAL_READERS_FILE`` if set, else the
worklist's ``RUNPLANE_WORKLIST_PRINCIPALS_FILE`` (see ``settings.py``). Identity comes from the
bearer token only, never from a request body or parameter.
"""

from __future__ import annotations

from runplane.serving.auth import Principal, PrincipalSource, require_principal

AUDITOR = "auditor"

__all__ = ["AUDITOR", "body_reader", "run_reader"]


def run_reader(principals: PrincipalSource, authorization: str | None) -> Principal:
    """Any principal presenting ``authorization``: 401 without a known bearer token."""
    return require_principal(principals, authorization, purpose="query runs")


def body_reader(principals: PrincipalSource, authorization: str | None) -> Principal:
    """The auditor presenting ``authorization``: 401 without a known bearer token, 403 for a
    principal without the role ``auditor``."""
    return require_principal(principals, authorization, role=AUDITOR, purpose="read bodies")
