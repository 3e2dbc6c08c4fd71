"""runplane.config's env readers: the one parser every settings object uses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runplane.config import env_bool, env_float, env_int, env_str
from runplane.errors import ConfigError
from services.admission.settings import AdmissionSettings
from services.executor.settings import ExecutorSettings
from services.journal.settings import JournalSettings
from services.worklist.settings import WorklistSettings


@pytest.mark.parametrize("raw", [None, ""])
def test_unset_and_empty_mean_the_default(raw: str | None) -> None:
    env = {} if raw is None else {"X": raw}
    assert env_int(env, "X", 7) == 7
    assert env_float(env, "X", 2.5) == 2.5
    assert env_bool(env, "X", True) is True
    assert env_bool(env, "X", False) is False
    assert env_str(env, "X", "d") == "d"
    assert env_str(env, "X") is None


def test_values_parse() -> None:
    env = {"I": "-12", "F": "0.25", "S": "text"}
    assert env_int(env, "I", 0) == -12
    assert env_float(env, "F", 0.0) == 0.25
    assert env_float(env, "I", 0.0) == -12.0
    assert env_str(env, "S", "d") == "text"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[("1", True), ("TRUE", True), (" yes ", True), ("On", True)],
        *[("0", False), ("false", False), ("No", False), ("off", False)],
    ],
)
def test_bool_spellings(raw: str, expected: bool) -> None:
    assert env_bool({"B": raw}, "B", not expected) is expected


@pytest.mark.parametrize(
    ("reader", "raw", "what"),
    [
        (lambda e: env_int(e, "RUNPLANE_N", 1), "1.5", "integer"),
        (lambda e: env_float(e, "RUNPLANE_N", 1.0), "fast", "number"),
        (lambda e: env_bool(e, "RUNPLANE_N", True), "maybe", "true or false"),
    ],
)
def test_unparsable_is_a_config_error_naming_the_variable(
    reader: Callable[[dict[str, str]], object], raw: str, what: str
) -> None:
    with pytest.raises(ConfigError) as info:
        reader({"RUNPLANE_N": raw})
    assert "RUNPLANE_N" in str(info.value)
    assert what in str(info.value)
    assert repr(raw) in str(info.value)


def test_services_read_through_the_same_parser() -> None:
    """Every service's settings refuse a bad value with the variable's name, and read a good
    one, through runplane.config (no private copies that could drift)."""
    cases = [
        (AdmissionSettings.from_env, "RUNPLANE_ADMISSION_BATCH_MAX", "many"),
        (ExecutorSettings.from_env, "RUNPLANE_EXECUTOR_BATCH_MS", "soon"),
        (JournalSettings.from_env, "RUNPLANE_JOURNAL_INDEX", "perhaps"),
        (WorklistSettings.from_env, "RUNPLANE_WORKLIST_WAIT_MS", "long"),
    ]
    for from_env, name, bad in cases:
        with pytest.raises(ConfigError, match=name):
            from_env({name: bad})
    assert ExecutorSettings.from_env({"RUNPLANE_EXECUTOR_BATCH_MS": "2.5"}).batch_ms == 2.5
    assert JournalSettings.from_env({"RUNPLANE_JOURNAL_INDEX": "off"}).index is False
    assert JournalSettings.from_env({"RUNPLANE_JOURNAL_INDEX": "0"}).index is False
    assert JournalSettings.from_env({}).index is True
    assert ExecutorSettings.from_env({"RUNPLANE_OPENAI_API_KEY": ""}).openai_api_key is None
