"""The executor warns at start when a model provider points at a remote endpoint without a key
(review m13): a missing key is otherwise found by the first model call of some run."""

from __future__ import annotations

import pytest

from services.executor.serve import missing_key_warnings
from services.executor.settings import ExecutorSettings


@pytest.mark.parametrize(
    "base_url",
    ["https://api.openai.com/v1", "http://llm-gateway.ai:8080/v1", "http://10.0.0.7/v1"],
)
def test_a_remote_endpoint_without_a_key_is_warned_about(base_url: str) -> None:
    (warning,) = missing_key_warnings(ExecutorSettings(openai_base_url=base_url))
    assert "RUNPLANE_OPENAI_API_KEY is not set" in warning and base_url in warning


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8399/v1", "http://localhost:8399/v1", "http://[::1]:8399/v1"],
)
def test_a_loopback_endpoint_needs_no_key(base_url: str) -> None:
    assert missing_key_warnings(ExecutorSettings(openai_base_url=base_url)) == []


def test_a_configured_key_silences_the_warning() -> None:
    settings = ExecutorSettings(openai_base_url="https://api.openai.com/v1", openai_api_key="sk-x")
    assert missing_key_warnings(settings) == []


def test_the_environment_is_read_the_same_way() -> None:
    env = {"RUNPLANE_OPENAI_BASE_URL": "https://api.openai.com/v1"}
    assert len(missing_key_warnings(ExecutorSettings.from_env(env))) == 1
    env["RUNPLANE_OPENAI_API_KEY"] = "sk-x"
    assert missing_key_warnings(ExecutorSettings.from_env(env)) == []
