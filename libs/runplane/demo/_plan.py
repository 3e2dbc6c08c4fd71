"""The demo's plan, as values: ports, the platform's environment, principals, the example runs,
and the verdict. No I/O here — the flow (``_flow.py``) carries these out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runplane.config import DEFAULT_AGENT_MODULES, SERVICE_PORTS, Settings, example_tools_config
from runplane.errors import ConfigError
from runplane.serving.auth import PRINCIPALS_FILE_ENV, Principals, token_digest

BILLING_PORT = 8398  # the executor's default RUNPLANE_BILLING_URL
OPENAI_PORT = 8399  # the executor's default RUNPLANE_OPENAI_BASE_URL
INITIATOR = "demo-emitter"  # who the example runs act for; four-eyes keeps it off the tasks
APPROVER = "ada"  # the demo principal who approves the refund (role finance)
SUPPORT_MODULE = "examples.support"  # the loop agent the demo runs beside the defaults
TERMINAL = frozenset({"COMPLETED", "FAILED", "QUARANTINED"})
DEMO_NAMESPACE = "runplane-demo"  # the namespace label the demo's scrape config gives its targets


@dataclass(frozen=True)
class DemoPorts:
    """Where the services and the fakes listen (defaults: the platform's well-known ports)."""

    services: Mapping[str, int] = field(default_factory=lambda: dict(SERVICE_PORTS))
    billing: int = BILLING_PORT
    openai: int = OPENAI_PORT

    def __post_init__(self) -> None:
        if set(self.services) != set(SERVICE_PORTS):
            raise ConfigError(f"demo ports must name every service: {sorted(SERVICE_PORTS)}")
        every = [*self.services.values(), self.billing, self.openai]
        if any(not 0 < p < 65536 for p in every):
            raise ConfigError(f"demo ports out of range: {every}")
        if len(set(every)) != len(every):
            raise ConfigError(f"demo ports must differ: {every}")

    def url(self, service: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.services[service]}{path}"

    @property
    def billing_url(self) -> str:
        return f"http://127.0.0.1:{self.billing}"

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.openai}/v1"

    def health_urls(self) -> tuple[str, ...]:
        return tuple(self.url(name, "/healthz") for name in SERVICE_PORTS)

    def scrape_config(self) -> str:
        """A Prometheus ``scrape_configs`` entry for the six services' ``/metrics``, as YAML.

        One target per service port: each serves its own service's metrics only (under
        ``serve all`` too), so the six together count everything once. ``honor_labels`` keeps
        runplane's own ``service`` label; the ``namespace`` label fills the dashboard's
        namespace selector (docs/grafana/runplane.json) as the chart's scrape would.
        """
        config = {
            "scrape_configs": [
                {
                    "job_name": "runplane",
                    "honor_labels": True,
                    "scrape_interval": "15s",
                    "static_configs": [
                        {
                            "targets": [f"127.0.0.1:{self.services[name]}"],
                            "labels": {"namespace": DEMO_NAMESPACE, "component": name},
                        }
                        for name in SERVICE_PORTS
                    ],
                }
            ]
        }
        return yaml.safe_dump(config, sort_keys=False, default_flow_style=None)


@dataclass(frozen=True)
class DemoPrincipal:
    name: str
    roles: tuple[str, ...]
    token: str

    def __post_init__(self) -> None:
        if len(self.token) < 8:
            raise ConfigError(f"demo principal {self.name}: token too short")


# The tokens examples/principals.yaml publishes in its comment (DEMO ONLY, loopback services).
PUBLISHED_TOKENS: Mapping[str, str] = {"ada": "demo-ada-token", "grace": "demo-grace-token"}
_NEEDED_ROLES = {"ada": {"finance", "auditor"}, "grace": {"finance"}}


def published_principals(principals: Principals) -> tuple[DemoPrincipal, ...] | None:
    """The demo principals of a principals file whose published tokens still match, else None
    (someone changed the file: the demo then makes its own)."""
    found = []
    for name, token in PUBLISHED_TOKENS.items():
        who = principals.authenticate(token)
        if who is None or who.name != name or not _NEEDED_ROLES[name] <= who.roles:
            return None
        found.append(DemoPrincipal(name, tuple(sorted(who.roles)), token))
    return tuple(found)


def demo_principals(tokens: Mapping[str, str]) -> tuple[DemoPrincipal, ...]:
    """Two finance people (so four-eyes has someone else to ask), one of them an auditor."""
    roles = {"ada": ("finance", "auditor"), "grace": ("finance", "supervisor")}
    missing = sorted(set(roles) - set(tokens))
    if missing:
        raise ConfigError(f"demo tokens missing for {missing}")
    return tuple(DemoPrincipal(name, r, tokens[name]) for name, r in roles.items())


def principals_yaml(principals: Sequence[DemoPrincipal]) -> str:
    """The principals file the worklist and journal read: hashed tokens only."""
    doc = {
        "principals": [
            {"name": p.name, "token_sha256": token_digest(p.token), "roles": list(p.roles)}
            for p in principals
        ]
    }
    header = "# Written by `runplane demo`; the tokens are in tokens.json beside this file.\n"
    return header + yaml.safe_dump(doc, sort_keys=False)


def demo_instance_id(env: Mapping[str, str], default: str) -> str:
    """The services' instance id: ``RUNPLANE_INSTANCE_ID`` when set, else ``demo-<default>``.

    Transactional ids are ``<service>-<instance id>`` and broker-wide (no topic prefix), so a
    demo on the host's default id would fence — and be fenced by — any other process run with
    the default on this broker (a ``runplane serve`` in another shell, a test).
    """
    explicit = env.get("RUNPLANE_INSTANCE_ID")
    return explicit if explicit else f"demo-{default}"


def platform_env(
    settings: Settings,
    ports: DemoPorts,
    *,
    principals_file: Path,
    calendars_file: Path | None,
    base: Mapping[str, str],
    agent_modules: tuple[str, ...] = (),
    tools_configs: tuple[str, ...] = (),
) -> dict[str, str]:
    """The environment of ``runplane serve all``: the settings it must share with the demo,
    the fakes' URLs, the principals and calendars files, and any non-default port.

    ``agent_modules`` and ``tools_configs`` (``runplane demo --agents … --tools …``) are
    served beside the examples, not instead of them."""
    env = dict(base)
    env.update(
        {
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "RUNPLANE_REDIS_URL": settings.redis_url,
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_PARTITIONS": str(settings.partitions),
            "RUNPLANE_STATE_DIR": str(settings.state_dir),
            "RUNPLANE_INSTANCE_ID": settings.instance_id,
            "RUNPLANE_HTTP_HOST": settings.http_host,
            "RUNPLANE_BILLING_URL": ports.billing_url,
            "RUNPLANE_OPENAI_BASE_URL": ports.openai_base_url,
            PRINCIPALS_FILE_ENV: str(principals_file),
            "RUNPLANE_JOURNAL_READERS_FILE": str(principals_file),
            # The demo emits unsigned requests: admission in dev mode (docs/security.md).
            "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
        }
    )
    # The default agent modules and their tools, plus the support example (a loop agent),
    # unless the caller names its own.
    if "RUNPLANE_AGENT_MODULES" not in base:
        env["RUNPLANE_AGENT_MODULES"] = ",".join((*DEFAULT_AGENT_MODULES, SUPPORT_MODULE))
        tools = example_tools_config()
        if tools is not None and "RUNPLANE_TOOLS_CONFIG" not in base:
            env["RUNPLANE_TOOLS_CONFIG"] = tools
    if agent_modules:
        env["RUNPLANE_AGENT_MODULES"] = ",".join(
            dict.fromkeys((*_listed(env.get("RUNPLANE_AGENT_MODULES")), *agent_modules))
        )
    if tools_configs:
        env["RUNPLANE_TOOLS_CONFIG"] = ",".join(
            dict.fromkeys((*_listed(env.get("RUNPLANE_TOOLS_CONFIG")), *tools_configs))
        )
        # The quote example's FX API: the billing fake answers /rates/{currency}, any token.
        env.setdefault("FX_API_URL", ports.billing_url)
        env.setdefault("FX_API_TOKEN", "demo-fx-token")
    if calendars_file is not None:
        env["RUNPLANE_CALENDARS_FILE"] = str(calendars_file)
    for name, port in ports.services.items():
        env[f"RUNPLANE_{name.upper()}_PORT"] = str(port)
    host = "127.0.0.1" if settings.http_host in ("0.0.0.0", "") else settings.http_host
    if "journal" in ports.services:
        # The worklist's task pages link each run to the journal's runs UI.
        env["RUNPLANE_WORKLIST_RUNS_UI"] = f"http://{host}:{ports.services['journal']}"
    if "worklist" in ports.services:
        # The run page links the task a run waits on to the worklist's task page.
        env["RUNPLANE_JOURNAL_WORKLIST_UI"] = f"http://{host}:{ports.services['worklist']}"
    return env


def _listed(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class DemoRequest:
    """One example run the demo emits."""

    capability: str
    key: str
    input: Mapping[str, Any]
    correlation: Mapping[str, str]
    needs_approval: bool = False
    # A support run (examples/support.py): whether its document carries an injection, which
    # the run's journal must then show refused (``_support.support_verdict``); None: not one.
    injected: bool | None = None

    def __post_init__(self) -> None:
        if not self.key or len(self.key.encode()) > 256:
            raise ConfigError(f"bad admission key {self.key!r}")


def demo_requests(nonce: str) -> tuple[DemoRequest, ...]:
    """The refund, the triage run and two support runs (an honest e-mail, an injected one);
    ``nonce`` (one per invocation) makes the admission keys
    new each time, so a second ``make demo`` starts new runs instead of meeting duplicates."""
    if not nonce or not nonce.isalnum():
        raise ConfigError(f"nonce must be alphanumeric, got {nonce!r}")
    invoice = f"INV-{int(hashlib.sha256(nonce.encode()).hexdigest()[:6], 16) % 9000 + 1000}"
    return (
        DemoRequest(
            "refund",
            f"demo-refund-{nonce}",
            {"invoice_id": invoice, "reason": "customer returned the order"},
            {"order": f"O-{nonce}"},
            needs_approval=True,
        ),
        DemoRequest(
            "triage",
            f"demo-triage-{nonce}",
            {"ticket": "Billing: I was charged twice for my last order."},
            {"ticket": f"T-{nonce}"},
        ),
        *(
            DemoRequest(
                "support",
                f"demo-support-{which}-{nonce}",
                {"customer_id": "c-1", "order": "o-1", "amount_eur": 40, "document_id": doc},
                {"case": f"S-{which}-{nonce}"},
                injected=which == "attacked",
            )
            for which, doc in (("honest", "d-honest"), ("attacked", "d-attack"))
        ),
    )


@dataclass(frozen=True)
class RunResult:
    """How one example run ended, as the demo saw it."""

    capability: str
    key: str
    run_id: str | None
    admission: str  # ADMITTED / DUPLICATE / REFUSED
    status: str | None
    verified: bool = False
    records: int = 0
    detail: str = ""
    injected: bool | None = None  # DemoRequest.injected
    behaved: bool = True  # a support run did what it must (its refunds, its refusals)

    @property
    def ok(self) -> bool:
        return (
            self.run_id is not None
            and self.status == "COMPLETED"
            and self.verified
            and self.behaved
        )


@dataclass(frozen=True)
class DemoOutcome:
    runs: tuple[RunResult, ...]

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.ok for r in self.runs)

    def problems(self) -> list[str]:
        out = []
        for r in self.runs:
            if r.run_id is None:
                out.append(f"{r.capability} ({r.key}) was {r.admission}: {r.detail}")
            elif r.status != "COMPLETED":
                out.append(f"{r.capability} {r.run_id} ended {r.status}: {r.detail}")
            elif not r.verified:
                out.append(f"{r.capability} {r.run_id}: journal does not verify: {r.detail}")
            elif not r.behaved:
                out.append(f"{r.capability} {r.run_id}: {r.detail}")
        return out

    def to_json(self) -> str:
        return json.dumps([r.__dict__ for r in self.runs], sort_keys=True)


def status_changes(
    before: Mapping[str, str | None], now: Mapping[str, str | None]
) -> list[tuple[str, str | None, str | None]]:
    """(run, old, new) for each run whose status changed — what the demo prints as it goes."""
    return [
        (run, before.get(run), status) for run, status in now.items() if before.get(run) != status
    ]
