"""``runplane principals new`` (review m7): a fresh token once, and an entry the services load."""

from __future__ import annotations

import re

import pytest
import yaml
from typer.testing import CliRunner

from runplane.auth import Principals
from runplane.cli import app

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
