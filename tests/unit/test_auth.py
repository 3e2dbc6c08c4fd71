"""Principals with hashed tokens: loading, authenticating, refusing bad files."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pytest
import yaml
from starlette.exceptions import HTTPException

from runplane.errors import ConfigError
from runplane.serving.auth import (
    Principals,
    PrincipalsFile,
    bearer_token,
    require_principal,
    token_digest,
)

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


# --- reloading -------------------------------------------------------------------------------


def _people(**roles: list[str]) -> str:
    lines = ["principals:"]
    for name, rs in roles.items():
        lines += [
            f"  - name: {name}",
            f"    token_sha256: {token_digest(name + '-secret')}",
            f"    roles: [{', '.join(rs)}]",
        ]
    return "\n".join(lines) + "\n"


def _rotate_file(path: Path, text: str) -> None:
    new = path.with_name(path.name + ".new")
    new.write_text(text)
    os.replace(new, path)


def test_an_edited_file_takes_effect_on_the_next_lookup(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_people(ada=["finance"]))
    source = PrincipalsFile(path)
    assert source.authenticate("ada-secret") is not None
    assert source.authenticate("bob-secret") is None
    _rotate_file(path, _people(ada=["finance", "auditor"], bob=["operator"]))
    assert source.roles_of("ada") == {"finance", "auditor"}
    bob = source.authenticate("bob-secret")
    assert bob is not None and bob.roles == {"operator"}
    # Rewritten in place (same inode): the mtime/size change is noticed too.
    path.write_text(_people(bob=["operator"]))
    os.utime(path, ns=(1, 1))
    assert source.authenticate("ada-secret") is None  # ada's token was revoked


def test_a_rotated_kubernetes_secret_is_picked_up(tmp_path: Path) -> None:
    # The kubelet's layout: principals.yaml -> ..data/principals.yaml, ..data -> a timestamped
    # directory; a rotation writes a new directory and swaps the ..data link atomically.
    secret = tmp_path / "secret"
    secret.mkdir()
    v1 = secret / "..2024_01_01"
    v1.mkdir()
    (v1 / "principals.yaml").write_text(_people(ada=["finance"]))
    (secret / "..data").symlink_to(v1.name)
    (secret / "principals.yaml").symlink_to("..data/principals.yaml")
    source = PrincipalsFile(secret)
    assert source.roles_of("ada") == {"finance"}
    v2 = secret / "..2024_02_01"
    v2.mkdir()
    (v2 / "principals.yaml").write_text(_people(ada=["supervisor"]))
    (secret / "..data_tmp").symlink_to(v2.name)
    os.replace(secret / "..data_tmp", secret / "..data")
    assert source.roles_of("ada") == {"supervisor"}


def test_a_broken_new_version_keeps_the_last_good_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_people(ada=["finance"]))
    source = PrincipalsFile(path)
    _rotate_file(path, "principals:\n  - name: ada\n    token: plaintext\n")
    with caplog.at_level(logging.WARNING, logger="runplane.serving.auth"):
        assert source.roles_of("ada") == {"finance"}
        assert source.roles_of("ada") == {"finance"}
    assert sum("not loaded" in r.getMessage() for r in caplog.records) == 1  # warned once
    path.unlink()
    assert source.roles_of("ada") == {"finance"}  # vanished mid-rotation: still served
    path.write_text(_people(ada=["auditor"]))
    assert source.roles_of("ada") == {"auditor"}  # a good version is taken again


def test_a_bad_file_at_start_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("principals: nope\n")
    with pytest.raises(ConfigError):
        PrincipalsFile(path)
    with pytest.raises(ConfigError):
        PrincipalsFile(tmp_path / "missing.yaml")
    assert PrincipalsFile(None).authenticate("ada-secret") is None
    assert PrincipalsFile.from_env({}).current() == Principals()


# --- the HTTP check --------------------------------------------------------------------------


def test_require_principal_answers_401_and_403_with_reasons() -> None:
    ps = Principals.from_data(yaml.safe_load(_people(ada=["finance"])))
    assert require_principal(ps, "Bearer ada-secret").name == "ada"
    for header in (None, "", "Bearer", "Basic ada-secret", "Bearer wrong"):
        with pytest.raises(HTTPException) as err:
            require_principal(ps, header)
        assert err.value.status_code == 401 and err.value.headers == {"WWW-Authenticate": "Bearer"}
    with pytest.raises(HTTPException) as err:
        require_principal(ps, "Bearer ada-secret", role="auditor", purpose="read bodies")
    assert err.value.status_code == 403
    assert err.value.detail == "ada may not read bodies (needs role 'auditor')"
