"""Body readers: tokens stored hashed, roles checked, bad files refused with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from runplane.errors import ConfigError

from services.journal.auth import AUDITOR, Readers, token_digest
from services.journal.settings import JournalSettings


def test_tokens_are_matched_by_their_hash(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "principals:\n"
        f"  - {{name: ada, token_sha256: {token_digest('s3cret')}, roles: [auditor]}}\n"
        f"  - {{name: bob, token_sha256: {token_digest('other')}, roles: [clerk]}}\n"
    )
    readers = Readers.from_file(f)
    ada = readers.authenticate("s3cret")
    assert ada is not None and ada.name == "ada" and AUDITOR in ada.roles
    bob = readers.authenticate("other")
    assert bob is not None and AUDITOR not in bob.roles
    assert readers.authenticate(token_digest("s3cret")) is None  # the stored hash is not a token
    assert "s3cret" not in f.read_text()


@pytest.mark.parametrize(
    "data, problem",
    [
        ({"principals": "x"}, "list"),
        ([{"token_sha256": "0" * 64}], "name"),
        ([{"name": "a", "token_sha256": "XYZ"}], "token_sha256"),
        ([{"name": "a", "token_sha256": "0" * 64, "roles": "auditor"}], "roles"),
    ],
)
def test_bad_principals_are_refused(data: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Readers.from_data(data)


def test_no_file_means_nobody_reads_bodies() -> None:
    assert Readers.from_file(None).authenticate("anything") is None


def test_settings_fall_back_to_the_worklist_principals() -> None:
    s = JournalSettings.from_env({"RUNPLANE_WORKLIST_PRINCIPALS_FILE": "/etc/p.yaml"})
    assert s.readers_file == Path("/etc/p.yaml")
    s = JournalSettings.from_env(
        {"RUNPLANE_WORKLIST_PRINCIPALS_FILE": "/etc/p.yaml", "RUNPLANE_JOURNAL_READERS_FILE": "/etc/j.yaml"}
    )
    assert s.readers_file == Path("/etc/j.yaml")
    with pytest.raises(ConfigError):
        JournalSettings.from_env({"RUNPLANE_JOURNAL_BODY_GRACE_MS": "soon"})
