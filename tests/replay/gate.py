"""The deploy gate's Job as the chart renders it (helm template), for the chart test and for the
integration test that runs the Job's command against a live broker."""

from __future__ import annotations

from typing import Any

import yaml

from tests.unit.test_deploy_consistency import CHART, find_helm, helm_template

__all__ = ["find_helm", "gate_jobs"]


def gate_jobs(helm: str, *sets: str) -> list[dict[str, Any]]:
    """The upgrade-gate Jobs of the chart rendered with ``--set`` ``sets`` (none unless enabled)."""
    result = helm_template(helm, CHART, None, *sets)
    assert result.returncode == 0, result.stderr
    return [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d
        and d.get("kind") == "Job"
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "upgrade-gate"
    ]
