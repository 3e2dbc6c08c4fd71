"""The chart's deploy gate: opt-in, a pre-upgrade hook Job running `runplane replay
--from-kafka` on the release's (new) image with the release's agent modules."""

from __future__ import annotations

import os

import pytest

from tests.replay.gate import find_helm, gate_jobs


@pytest.fixture(scope="module")
def helm() -> str:
    found = find_helm()
    if found is None:
        message = "helm not found: run scripts/install-helm-tools.sh (installs .runplane/bin/helm)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_the_gate_is_off_unless_asked_for(helm: str) -> None:
    assert gate_jobs(helm) == []


def test_the_gate_job_replays_runs_in_flight_before_the_upgrade(helm: str) -> None:
    [job] = gate_jobs(
        helm,
        "upgradeGate.enabled=true",
        "upgradeGate.capability=refund",
        "image.tag=2.0.0",
        "config.agentModules=agents.v2",
    )
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-upgrade"
    assert int(annotations["helm.sh/hook-weight"]) > -5  # after the topics Job
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    [container] = pod["containers"]
    assert container["image"].endswith(":2.0.0")  # the new image
    assert container["args"] == [
        "replay",
        "--from-kafka",
        "--json",
        "--sample",
        "200",
        "--capability",
        "refund",
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RUNPLANE_AGENT_MODULES"] == "agents.v2"
    [all_runs] = gate_jobs(helm, "upgradeGate.enabled=true", "upgradeGate.sample=0")
    assert all_runs["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "replay",
        "--from-kafka",
        "--json",
    ]
