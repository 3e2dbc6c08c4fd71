"""``runplane principals new`` (review m7): a fresh token once, and an entry the services load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runplane.cli import app
from runplane.serving.auth import Principals
from runplane.signing.admission import Emitters, SigningKey, Verified, verify

pytestmark = pytest.mark.unit


def _new(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(app, ["principals", "new", *args])
    assert result.exit_code == 0, result.output
    token = re.search(r"^  (\S+)$", result.output, re.M)
    assert token is not None
    entry = result.output.split("(under `principals:`):\n", 1)[1].split("\n\n", 1)[0]
    return token.group(1), entry


def test_the_printed_entry_authenticates_the_printed_token_and_nothing_else() -> None:
    token, entry = _new("--name", "ada", "--roles", "finance, auditor")
    assert len(token) >= 43  # token_urlsafe(32): 256 bits
    principals = Principals.from_data({"principals": yaml.safe_load(entry)})
    who = principals.authenticate(token)
    assert who is not None and who.name == "ada" and who.roles == {"finance", "auditor"}
    assert token not in entry  # only its digest is stored
    assert principals.authenticate(token + "x") is None


def test_every_call_mints_a_new_token() -> None:
    assert _new("--name", "bob")[0] != _new("--name", "bob")[0]


@pytest.mark.parametrize("name", ["two words", "", "x" * 200])
def test_a_name_the_services_would_refuse_is_refused_here(name: str) -> None:
    result = CliRunner().invoke(app, ["principals", "new", "--name", name])
    assert result.exit_code != 0
    assert "token_sha256" not in result.output  # no entry printed for a refused name


def test_principals_new_puts_the_principal_in_its_tenant() -> None:
    token, entry = _new("--name", "gil", "--roles", "finance", "--tenant", "globex")
    who = Principals.from_data(yaml.safe_load(entry)).authenticate(token)
    assert who is not None and who.tenant == "globex"


def test_emitters_new_key_writes_a_private_key_whose_entry_admission_verifies(
    tmp_path: Path,
) -> None:
    out = tmp_path / "gw.key"
    args = ["emitters", "new-key", "--name", "gw", "--tenant", "acme", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--initiators", "ivan", "--key-id", "gw-1"])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o600
    entry = result.output.split("RUNPLANE_ADMISSION_EMITTERS_FILE):\n", 1)[1].split("\n\n")[0]
    emitters = Emitters.from_data(yaml.safe_load(entry))
    key = SigningKey.from_env({"RUNPLANE_EMITTER_KEY_FILE": str(out)})
    assert key is not None and key.key_id == "gw-1"
    verified = verify(emitters, b"k", b"v", key.headers(b"k", b"v", 5), 5)
    assert isinstance(verified, Verified) and verified.emitter.initiators == frozenset({"ivan"})
    assert key.to_text().split(":")[1] not in result.output  # the private half never printed
    again = CliRunner().invoke(app, args)
    assert again.exit_code != 0 and "exists" in again.output  # a key is never overwritten
