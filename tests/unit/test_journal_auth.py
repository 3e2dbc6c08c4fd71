"""Body readers: the journal's one rule (role ``auditor``) on top of ``runplane.serving.auth``.

Loading, hashing and reloading principals are ``runplane.serving.auth``'s and tested in
``test_auth.py``; here: who may read bodies, the HTTP answers, the settings' fallback, and that
a rotated file changes who may read bodies without a restart.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException

from runplane.errors import ConfigError
from runplane.serving.auth import Principals, PrincipalsFile, token_digest
from services.journal.auth import AUDITOR, body_reader
from services.journal.settings import JournalSettings

READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("s3cret"), "roles": [AUDITOR]},
        {"name": "bob", "token_sha256": token_digest("other"), "roles": ["clerk"]},
    ]
)


def _status(authorization: str | None, readers: object = READERS) -> int:
    try:
        body_reader(readers, authorization)  # type: ignore[arg-type]
    except HTTPException as exc:
        return exc.status_code
    return 200


def test_only_an_auditors_bearer_token_reads_bodies() -> None:
    assert body_reader(READERS, "Bearer s3cret").name == "ada"
    assert _status(None) == 401
    assert _status("Bearer nope") == 401
    assert _status(f"Bearer {token_digest('s3cret')}") == 401  # the stored hash is not a token
    assert _status("Basic s3cret") == 401
    with pytest.raises(HTTPException) as err:
        body_reader(READERS, "Bearer other")
    assert (
        err.value.status_code == 403 and AUDITOR in err.value.detail and "bob" in err.value.detail
    )


def test_no_file_means_nobody_reads_bodies() -> None:
    assert _status("Bearer anything", PrincipalsFile(None)) == 401


def test_a_rotated_readers_file_takes_effect_without_a_restart(tmp_path: Path) -> None:
    f = tmp_path / "readers.yaml"
    f.write_text(f"- {{name: bob, token_sha256: {token_digest('other')}, roles: [clerk]}}\n")
    readers = PrincipalsFile(f)
    assert _status("Bearer other", readers) == 403
    new = tmp_path / "next.yaml"
    new.write_text(f"- {{name: bob, token_sha256: {token_digest('other')}, roles: [{AUDITOR}]}}\n")
    os.replace(new, f)  # how a secret rotation lands: a new file in one step
    assert _status("Bearer other", readers) == 200


def test_settings_fall_back_to_the_worklist_principals() -> None:
    s = JournalSettings.from_env({"RUNPLANE_WORKLIST_PRINCIPALS_FILE": "/etc/p.yaml"})
    assert s.readers_file == Path("/etc/p.yaml")
    s = JournalSettings.from_env(
        {
            "RUNPLANE_WORKLIST_PRINCIPALS_FILE": "/etc/p.yaml",
            "RUNPLANE_JOURNAL_READERS_FILE": "/etc/j.yaml",
        }
    )
    assert s.readers_file == Path("/etc/j.yaml")
    with pytest.raises(ConfigError):
        JournalSettings.from_env({"RUNPLANE_JOURNAL_BODY_GRACE_MS": "soon"})
