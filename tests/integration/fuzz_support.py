"""Run the schemathesis CLI against a service's ``/openapi.json`` (no tests here).

Why the CLI in a subprocess rather than schemathesis' pytest plugin: the plugin
(``schema.parametrize()``) fails under our pytest 9 (``'Function' object has no attribute
'_nodeid'``). The CLI also runs every phase the plugin would not give us by hand — the
coverage phase (boundary and invalid values per parameter, unsupported methods), fuzzing
(positive and negative data) and the stateful phase (links inferred from the description:
a task id listed by ``GET /api/tasks`` is claimed, released, decided) — and exits non-zero on
any failed check. The one check asked for is ``not_a_server_error``: no 5xx, ever.

Every request and response is recorded in a HAR file; :class:`FuzzRun` reads it back so a
test can say what the fuzz really reached (statuses, whether a token was sent), not only that
nothing failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The venv's console script; `python -m schemathesis` does not exist (no __main__).
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))


def budget_s(default: int) -> int:
    """Seconds per fuzz run: ``RUNPLANE_FUZZ_SECONDS`` overrides (a longer hunt by hand)."""
    raw = os.environ.get("RUNPLANE_FUZZ_SECONDS", "")
    return int(raw) if raw.strip() else default


@dataclass(frozen=True)
class Exchange:
    method: str
    url: str
    authorization: str | None  # the header as sent; None when the request had none
    status: int
    body: str


@dataclass(frozen=True)
class FuzzRun:
    returncode: int
    output: str
    exchanges: tuple[Exchange, ...]

    @property
    def statuses(self) -> Counter[int]:
        return Counter(e.status for e in self.exchanges)

    def summary(self) -> str:
        """The CLI's closing summary (phases, failures, test case count, seed) and the
        statuses the API answered, by count."""
        _, sep, tail = self.output.partition("SUMMARY")
        text = (sep + tail) if sep else self.output[-4000:]
        return f"{text.rstrip()}\nstatuses: {sorted(self.statuses.items())}"

    def explain(self) -> str:
        return f"exit {self.returncode}; statuses {sorted(self.statuses.items())}\n{self.output}"


def run_schemathesis(
    base_url: str,
    workdir: Path,
    *,
    headers: Mapping[str, str] | None = None,
    max_time_s: int = 30,
    max_examples: int = 50,
    extra: Sequence[str] = (),
) -> FuzzRun:
    """Fuzz ``base_url``'s OpenAPI description for ``max_time_s`` seconds (the CLI's time
    budget: fuzzing and stateful rounds repeat until it is spent, so a slow machine runs fewer
    cases rather than a longer test). ``headers`` go on every request, overriding what the
    fuzzer generates for the same header (e.g. ``Authorization``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    har = workdir / "exchanges.har.json"
    cmd = [
        SCHEMATHESIS,
        "run",
        f"{base_url}/openapi.json",
        "--checks",
        "not_a_server_error",
        "--max-time",
        str(max_time_s),
        "--max-examples",
        str(max_examples),
        "--workers",
        "1",  # two cores shared by the whole team
        "--request-timeout",
        "30",
        # The health checks are about data generation (e.g. the decide body's validator
        # rejects most generated bodies), not about the API: they would fail the run
        # without a request having failed.
        "--suppress-health-check",
        "all",
        "--generation-database",
        "none",
        "--no-color",
        # Test tokens only; the HAR must show what Authorization each request carried.
        "--output-sanitize",
        "false",
        "--report",
        "har",
        "--report-har-path",
        str(har),
        *extra,
    ]
    for name, value in (headers or {}).items():
        cmd += ["--header", f"{name}: {value}"]
    # cwd: the CLI writes .hypothesis/ and .schemathesis/ caches where it runs.
    proc = subprocess.run(
        cmd,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=max_time_s + 120,
        check=False,
    )
    output = proc.stdout + proc.stderr
    return FuzzRun(proc.returncode, output, _read_har(har) if har.exists() else ())


def _read_har(path: Path) -> tuple[Exchange, ...]:
    log = json.loads(path.read_text())["log"]
    out = []
    for entry in log["entries"]:
        request, response = entry["request"], entry["response"]
        auth = [h["value"] for h in request["headers"] if h["name"].lower() == "authorization"]
        out.append(
            Exchange(
                method=request["method"],
                url=request["url"],
                authorization=auth[0] if auth else None,
                status=int(response["status"]),
                body=str(response.get("content", {}).get("text", "")),
            )
        )
    return tuple(out)
