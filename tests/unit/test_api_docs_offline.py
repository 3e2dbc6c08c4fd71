"""Every HTTP API's reference at /docs loads nothing from outside the service (the journal's
run API and the worklist's; admission's is in test_admission_http)."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from runplane.serving.auth import Principals
from services.journal.api import build_api as journal_api
from services.worklist.api import build_api as worklist_api

pytestmark = pytest.mark.unit


def _apps() -> dict[str, FastAPI]:
    nobody = Principals.from_data([])

    class Nothing:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the docs page must not read {name}")

    return {
        "journal": journal_api(lambda: None, Nothing(), nobody),  # type: ignore[arg-type]
        "worklist": worklist_api(Nothing(), nobody),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("name", ["journal", "worklist"])
def test_the_docs_page_and_its_assets_come_from_the_service(name: str) -> None:
    http = TestClient(_apps()[name])
    page = http.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls
    for url in urls:
        if url != "/openapi.json":
            assert http.get(url).status_code == 200, url
    assert http.get("/openapi.json").json()["info"]["title"].startswith("runplane")
    assert http.get("/redoc").status_code == 404  # no ReDoc: its files ship in no package
