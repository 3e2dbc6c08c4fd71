"""Principals with hashed tokens: loading, authenticating, refusing bad files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runplane.auth import Principals, bearer_token, token_digest
from runplane.errors import ConfigError

pytestmark = pytest.mark.unit

YAML = f"""
principals:
  - name: ada
    token_sha256: {hashlib.sha256(b"ada-secret").hexdigest()}
    roles: [finance, auditor]
  - name: bob
    token_sha256: {hashlib.sha256(b"bob-secret").hexdigest().upper()}
    roles: [finance]
"""


def test_a_token_authenticates_its_principal_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(YAML)
    ps = Principals.from_file(path)
    ada = ps.authenticate("ada-secret")
    assert ada is not None and ada.name == "ada" and ada.roles == {"finance", "auditor"}
    bob = ps.authenticate("bob-secret")  # an upper-case digest in the file still matches
    assert bob is not None and bob.name == "bob"
    for bad in ("", None, "ada-secret ", "ADA-SECRET", token_digest("ada-secret")):
        assert ps.authenticate(bad) is None
    assert ps.roles_of("bob") == {"finance"} and ps.roles_of("nobody") == frozenset()


def test_a_mounted_secret_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "principals.yaml").write_text(YAML)
    ps = Principals.from_file(tmp_path)
    assert [p.name for p in ps.principals] == ["ada", "bob"]
    assert Principals.from_env({"RUNPLANE_WORKLIST_PRINCIPALS_FILE": str(tmp_path)}) == ps
    assert Principals.from_env({}).principals == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("principals: 3", "list"),
        ("- name: x\n  token: plaintext\n  token_sha256: " + "a" * 64, "never the token"),
        ("- name: x\n  token_sha256: abc", "64 lowercase hex"),
        ("- name: ''\n  token_sha256: " + "a" * 64, "name"),
        ("- name: 'a b'\n  token_sha256: " + "a" * 64, "whitespace"),
        ("- name: x\n  token_sha256: " + "a" * 64 + "\n  roles: finance", "roles"),
        (
            "- {name: x, token_sha256: "
            + "a" * 64
            + "}\n- {name: x, token_sha256: "
            + "b" * 64
            + "}",
            "twice",
        ),
        (
            "- {name: x, token_sha256: "
            + "a" * 64
            + "}\n- {name: y, token_sha256: "
            + "a" * 64
            + "}",
            "share",
        ),
        ("principals: [\n", "cannot read"),
    ],
)
def test_bad_files_are_config_errors_that_say_why(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        Principals.from_file(path)


def test_bearer_header_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    for bad in (None, "", "Bearer", "Bearer  ", "Basic abc", "abc"):
        assert bearer_token(bad) is None


def test_the_example_principals_file_matches_its_documented_tokens() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "principals.yaml"
    ps = Principals.from_file(path)
    for name in ("ada", "grace", "olga", "ivan"):
        who = ps.authenticate(f"demo-{name}-token")
        assert who is not None and who.name == name
    assert "token:" not in path.read_text().replace("token_sha256:", "")
