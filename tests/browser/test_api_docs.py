"""Each API's reference page renders in Chromium from the service alone (no CDN): the
journal's run API and admission's, with every request the page makes going to the service."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from runplane.serving.auth import Principals
from runplane.serving.health import Health
from runplane.serving.shell import run_http
from services.admission.http import HttpAdmission
from services.admission.identity import Authentication
from services.admission.operate import HttpOperate
from services.admission.serve import http_app
from services.journal.api import build_api

pytestmark = pytest.mark.browser


class Nothing:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the docs page must not use {name}")


def _apps() -> dict[str, FastAPI]:
    nobody = Principals.from_data([])
    return {
        "journal": build_api(lambda: None, Nothing(), nobody),
        "admission": http_app(
            Health(), HttpAdmission(Authentication(), Nothing()), HttpOperate(nobody, Nothing())
        ),
    }


@pytest.fixture
def served() -> Iterator[dict[str, str]]:
    stop = threading.Event()
    apps = _apps()
    with (
        run_http(apps["journal"], "127.0.0.1", 0, stop) as journal,
        run_http(apps["admission"], "127.0.0.1", 0, stop) as admission,
    ):
        yield {
            "journal": f"http://127.0.0.1:{journal.port}",
            "admission": f"http://127.0.0.1:{admission.port}",
        }
    stop.set()


@pytest.mark.parametrize(("name", "path"), [("journal", "/runs"), ("admission", "/admit")])
def test_the_reference_renders_offline(
    served: dict[str, str], chromium: Any, output_dir: Path, name: str, path: str
) -> None:
    base = served[name]
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{base}/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
    assert path in page.inner_text(".swagger-ui")
    page.screenshot(path=str(output_dir / f"api-docs-{name}.png"), full_page=False)
    outside = [u for u in requests if not u.startswith(base) and not u.startswith("data:")]
    assert not outside, outside
