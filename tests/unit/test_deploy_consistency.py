"""The deploy artifacts agree with the code and with each other.

docker-compose.yml, the Helm chart (values and rendered manifests), the Dockerfile, the Grafana
dashboard and docs/metrics.md are checked against the code's own truth:

* services and ports: ``runplane.config.SERVICE_PORTS`` (the six services of docs/design.md);
* topics: ``runplane.kafka.topics.CATALOGUE`` (what ``runplane topics create`` creates);
* environment: every ``RUNPLANE_*`` name a deploy artifact sets is one the code reads, and
  every name ``Settings.from_env`` reads is set by both;
* image: one image name, its tag the project's version.

Each check is a function returning a list of problems, so the mutation tests below can prove
that removing a service or a topic from either artifact is caught.

Rendering the chart needs ``helm`` (``scripts/install-helm-tools.sh`` puts it in
``.runplane/bin``; ``.ci/run`` runs that script). In CI a missing helm fails; elsewhere the
chart tests skip with the command to run.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from runplane.config import SERVICE_PORTS, Settings
from runplane.core.calendars import CalendarRegistry
from runplane.kafka.topics import CATALOGUE, expected_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
CHART = ROOT / "helm" / "runplane"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
DOCKERFILE = ROOT / "Dockerfile"
METRICS_DOC = ROOT / "docs" / "metrics.md"
DASHBOARD = CHART / "dashboards" / "runplane.json"

DESIGN_SERVICES = ("admission", "executor", "cases", "sweeper", "worklist", "journal", "queues")
SERVICES = tuple(SERVICE_PORTS)
TOPICS = tuple(spec.name for spec in CATALOGUE)
KUBE_VERSION = "1.33.0"

# Names a deploy artifact may set before the code that reads them has landed (name -> why).
# Keep it empty unless a service is mid-way; an entry the code reads is pointless.
PENDING_ENV: dict[str, str] = {}
# Names Settings.from_env reads that an artifact may leave to the default, and why.
OPTIONAL_ENV = {
    "RUNPLANE_SCHEMA_REGISTRY_URL": "unset = Avro single-object encoding, no registry",
    "RUNPLANE_INSTANCE_ID": "compose keeps the hostname default (the chart's is checked apart)",
    "RUNPLANE_INITIATOR": "the emitting client's default initiator; no service reads it",
    "RUNPLANE_AGENT_MODULES": "unset = the example agents, the code's default",
    **{
        f"RUNPLANE_KAFKA_{name}": "unset = PLAINTEXT without authentication (docs/security.md)"
        for name in (
            "SECURITY_PROTOCOL",
            "SASL_MECHANISM",
            "SASL_USERNAME",
            "SASL_PASSWORD",
            "SSL_CA_LOCATION",
            "SSL_CERTIFICATE_LOCATION",
            "SSL_KEY_LOCATION",
            "SSL_KEY_PASSWORD",
            "SSL_ENDPOINT_IDENTIFICATION",
        )
    },
}
# Where a service's code lets transaction.timeout.ms be set; the chart wires
# kafka.transactionTimeoutSeconds into these. The other transactional services keep 60 s.
TRANSACTION_TIMEOUT_ENV = {
    "admission": "RUNPLANE_ADMISSION_TRANSACTION_TIMEOUT_MS",
    "executor": "RUNPLANE_EXECUTOR_TRANSACTION_TIMEOUT_MS",
}
FIXED_TRANSACTION_TIMEOUT_S = 60
LOOPBACK = "127.0.0.1"

Problems = list[str]


# --- the code's truth --------------------------------------------------------------------------


def _python_sources() -> Iterator[Path]:
    for top in ("libs", "services"):
        yield from (ROOT / top).rglob("*.py")


@cache
def env_names_read_by_code() -> frozenset[str]:
    """Every ``RUNPLANE_*`` string literal in libs/ and services/, plus the per-service ports.

    ``Settings.http_port`` builds ``RUNPLANE_<SERVICE>_PORT`` at run time; that it reads
    those names is checked by ``test_service_port_variables_are_read``.
    """
    names = {f"RUNPLANE_{s.upper()}_PORT" for s in SERVICES}
    for path in _python_sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"RUNPLANE_[A-Z0-9_]+", node.value)
            ):
                names.add(node.value)
    return frozenset(names)


@cache
def settings_env_names() -> frozenset[str]:
    """The names ``runplane.config.Settings.from_env`` reads."""
    tree = ast.parse((ROOT / "libs" / "runplane" / "config.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "from_env":
            return frozenset(
                n.value
                for n in ast.walk(node)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and n.value.startswith("RUNPLANE_")
            )
    raise AssertionError("Settings.from_env not found in runplane/config.py")


@cache
def project_version() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return str(data["project"]["version"])


def expected_image() -> str:
    return f"runplane/runplane:{project_version()}"


def unknown_env(names: set[str]) -> set[str]:
    return names - env_names_read_by_code() - set(PENDING_ENV)


# --- docker-compose.yml ------------------------------------------------------------------------


def load_compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return doc


def compose_image(service: Mapping[str, Any]) -> str:
    """The image with ``${VAR:-default}`` resolved to its default."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(service.get("image", "")))


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _depends(service: Mapping[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {k: (v or {}).get("condition", "service_started") for k, v in deps.items()}


def compose_problems(doc: Mapping[str, Any]) -> Problems:
    problems: Problems = []
    services: Mapping[str, Any] = doc.get("services") or {}
    image = expected_image()

    topics = services.get("topics")
    if topics is None:
        problems.append("compose: no `topics` service (runplane topics create)")
    else:
        if topics.get("command") != ["topics", "create"]:
            problems.append(f"compose: topics runs {topics.get('command')!r}, not topics create")
        if _depends(topics).get("kafka") != "service_healthy":
            problems.append("compose: topics must depend on kafka being healthy")

    for name in SERVICES:
        svc = services.get(name)
        if svc is None:
            problems.append(f"compose: service {name} is missing")
            continue
        port = SERVICE_PORTS[name]
        if svc.get("command") != ["serve", name]:
            problems.append(f"compose: {name} runs {svc.get('command')!r}, not serve {name}")
        if compose_image(svc) != image:
            problems.append(f"compose: {name} image {compose_image(svc)!r} != {image!r}")
        if f"{LOOPBACK}:{port}:{port}" not in [str(p) for p in svc.get("ports") or []]:
            problems.append(f"compose: {name} does not publish {LOOPBACK}:{port}:{port}")
        test = " ".join(map(str, (svc.get("healthcheck") or {}).get("test") or []))
        if f":{port}/readyz" not in test:
            problems.append(f"compose: {name} healthcheck does not probe :{port}/readyz")
        if _depends(svc).get("topics") != "service_completed_successfully":
            problems.append(f"compose: {name} must wait for topics to complete")
        env = compose_env(svc)
        missing = settings_env_names() - set(OPTIONAL_ENV) - set(env)
        if missing:
            problems.append(f"compose: {name} does not set {sorted(missing)}")
        if env.get("RUNPLANE_HTTP_HOST") != "0.0.0.0":
            problems.append(f"compose: {name} must listen on 0.0.0.0 in a container")
        if unknown := unknown_env(set(env)):
            problems.append(f"compose: {name} sets names no code reads: {sorted(unknown)}")

    for name, svc in services.items():
        for published in map(str, svc.get("ports") or []):
            if not published.startswith(f"{LOOPBACK}:"):
                problems.append(f"compose: {name} publishes {published} on every interface")

    runplane_services = {n for n, s in services.items() if compose_image(s) == image}
    if extra := runplane_services - set(SERVICES) - {"topics"}:
        problems.append(f"compose: services not in runplane.config.SERVICE_PORTS: {sorted(extra)}")
    return problems


# --- the Helm chart ----------------------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_values(chart: Path = CHART, extra: Path | None = None) -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((chart / "values.yaml").read_text())
    if extra is not None:
        values = deep_merge(values, yaml.safe_load(extra.read_text()) or {})
    return values


def find_helm() -> str | None:
    candidates = [
        Path(os.environ.get("RUNPLANE_TOOLS_BIN", ROOT / ".runplane" / "bin")) / "helm",
        ROOT / ".runplane" / "bin" / "helm",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("helm")


@pytest.fixture(scope="session")
def helm() -> str:
    found = find_helm()
    if found is None:
        message = "helm not found: run scripts/install-helm-tools.sh (installs .runplane/bin/helm)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def helm_template(
    helm: str, chart: Path = CHART, values: Path | None = None, *sets: str
) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", "runplane", str(chart), "--namespace", "runplane"]
    cmd += ["--kube-version", KUBE_VERSION]
    if values is not None:
        cmd += ["--values", str(values)]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def render(helm: str, chart: Path = CHART, values: Path | None = None) -> list[dict[str, Any]]:
    result = helm_template(helm, chart, values)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return [d for d in yaml.safe_load_all(result.stdout) if d]


_rendered: dict[tuple[str, str], list[dict[str, Any]]] = {}


def render_cached(helm: str, values: Path | None) -> list[dict[str, Any]]:
    key = (helm, str(values))
    if key not in _rendered:
        _rendered[key] = render(helm, CHART, values)
    return copy.deepcopy(_rendered[key])


def _component(doc: Mapping[str, Any]) -> str:
    labels = (doc.get("metadata") or {}).get("labels") or {}
    return str(labels.get("app.kubernetes.io/component", ""))


def _of_kind(docs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") in kinds]


def container_env_names(container: Mapping[str, Any]) -> set[str]:
    return {e["name"] for e in container.get("env") or []}


PROBE_PATHS = {"startupProbe": "/livez", "livenessProbe": "/livez", "readinessProbe": "/readyz"}


def chart_problems(values: Mapping[str, Any], docs: list[dict[str, Any]]) -> Problems:
    """Problems of one rendering of the chart with ``values`` (the merged values used)."""
    problems: Problems = []
    image = expected_image() if not values["image"]["tag"] else None
    kafka = values["kafka"]
    partitions = int(kafka["partitions"])

    config_maps = {d["metadata"]["name"]: d for d in _of_kind(docs, "ConfigMap")}
    env_cm = next((d for n, d in config_maps.items() if n.endswith("-env")), None)
    shared_env = set((env_cm or {}).get("data") or {})
    if env_cm is None:
        problems.append("chart: no -env ConfigMap")
    if unknown := unknown_env(shared_env):
        problems.append(f"chart: the env ConfigMap sets names no code reads: {sorted(unknown)}")

    workloads = {_component(d): d for d in _of_kind(docs, "Deployment", "StatefulSet")}
    services = {
        _component(d): d
        for d in _of_kind(docs, "Service")
        if (d.get("spec") or {}).get("clusterIP") != "None"
    }
    pdbs = {_component(d) for d in _of_kind(docs, "PodDisruptionBudget")}
    if extra := set(workloads) - set(SERVICES):
        problems.append(f"chart: workloads not in runplane.config.SERVICE_PORTS: {sorted(extra)}")

    for name in SERVICES:
        port = SERVICE_PORTS[name]
        w = workloads.get(name)
        if w is None:
            problems.append(f"chart: no workload for service {name}")
            continue
        pod = w["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        if c.get("args") != ["serve", name]:
            problems.append(f"chart: {name} runs {c.get('args')!r}, not serve {name}")
        if image is not None and c.get("image") != image:
            problems.append(f"chart: {name} image {c.get('image')!r} != {image!r}")
        ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
        if ports.get("http") != port:
            problems.append(f"chart: {name} containerPort {ports.get('http')} != {port}")
        env = {e["name"]: e for e in c.get("env") or []}
        if missing := settings_env_names() - set(OPTIONAL_ENV) - shared_env - set(env):
            problems.append(f"chart: {name} does not get {sorted(missing)}")
        if (env.get(f"RUNPLANE_{name.upper()}_PORT") or {}).get("value") != str(port):
            problems.append(f"chart: {name} does not set RUNPLANE_{name.upper()}_PORT={port}")
        instance = (env.get("RUNPLANE_INSTANCE_ID") or {}).get("valueFrom") or {}
        if (instance.get("fieldRef") or {}).get("fieldPath") != "metadata.name":
            problems.append(f"chart: {name} RUNPLANE_INSTANCE_ID is not the pod name")
        if unknown := unknown_env(set(env)):
            problems.append(f"chart: {name} sets names no code reads: {sorted(unknown)}")
        # Restart only a stuck loop; route traffic only to a restored one (review M5).
        for probe, path in PROBE_PATHS.items():
            get = (c.get(probe) or {}).get("httpGet") or {}
            if get.get("path") != path or get.get("port") not in ("http", port):
                problems.append(f"chart: {name} {probe} is not GET {path} on its port")
        timeout_s = int(kafka["transactionTimeoutSeconds"])
        if name in TRANSACTION_TIMEOUT_ENV:
            got = (env.get(TRANSACTION_TIMEOUT_ENV[name]) or {}).get("value")
            if got != str(timeout_s * 1000):
                problems.append(
                    f"chart: {name} {TRANSACTION_TIMEOUT_ENV[name]}={got!r}, "
                    f"not kafka.transactionTimeoutSeconds ({timeout_s}) in ms"
                )
        grace = int(pod.get("terminationGracePeriodSeconds", 30))
        if grace < max(timeout_s, FIXED_TRANSACTION_TIMEOUT_S):
            problems.append(f"chart: {name} grace {grace}s < the longest transaction timeout")
        svc = services.get(name)
        if svc is None or [p["port"] for p in svc["spec"]["ports"]] != [port]:
            problems.append(f"chart: Service of {name} does not expose {port}")
        if name not in pdbs:
            problems.append(f"chart: no PodDisruptionBudget for {name}")

    hpas = {_component(d): d for d in _of_kind(docs, "HorizontalPodAutoscaler")}
    if "executor" not in hpas:
        problems.append("chart: no HorizontalPodAutoscaler for the executor")
    for component, hpa in hpas.items():
        if hpa["spec"]["maxReplicas"] > partitions:
            problems.append(f"chart: HPA {component} maxReplicas > {partitions} partitions")
        target = hpa["spec"]["scaleTargetRef"]
        if component in workloads and target["name"] != workloads[component]["metadata"]["name"]:
            problems.append(f"chart: HPA {component} targets {target['name']}")

    problems += chart_topic_problems(values, docs)
    return problems


def values_topic_problems(values: Mapping[str, Any]) -> Problems:
    """topics.catalogue in the values lists the code's topics with the code's configuration."""
    problems: Problems = []
    listed = {t["name"]: t.get("config") or {} for t in values["topics"]["catalogue"]}
    if missing := [t for t in TOPICS if t not in listed]:
        problems.append(f"chart: topics.catalogue lacks {missing}")
    if extra := [t for t in listed if t not in TOPICS]:
        problems.append(f"chart: topics.catalogue has topics the code does not: {extra}")
    for spec in CATALOGUE:
        got = {k: str(v) for k, v in listed.get(spec.name, {}).items()}
        if spec.name in listed and got != spec.base_config():
            problems.append(f"chart: topics.catalogue {spec.name} {got} != {spec.base_config()}")
    return problems


def chart_topic_problems(values: Mapping[str, Any], docs: list[dict[str, Any]]) -> Problems:
    problems = values_topic_problems(values)
    kafka = values["kafka"]

    settings = Settings(
        topic_prefix=kafka["topicPrefix"],
        partitions=int(kafka["partitions"]),
        replication_factor=int(kafka["replicationFactor"]),
    )
    jobs = [d for d in _of_kind(docs, "Job") if _component(d) == "topics"]
    kafka_topics = {d["spec"]["topicName"]: d for d in _of_kind(docs, "KafkaTopic")}
    if values["topics"]["strimzi"]["enabled"]:
        if jobs:
            problems.append("chart: both a topics Job and KafkaTopic resources")
        for topic in TOPICS:
            full = settings.topic(topic)
            kt = kafka_topics.get(full)
            if kt is None:
                problems.append(f"chart: no KafkaTopic for topic {topic} ({full})")
                continue
            if kt["apiVersion"] != "kafka.strimzi.io/v1":
                problems.append(f"chart: KafkaTopic {topic} is {kt['apiVersion']}")
            spec = kt["spec"]
            if (spec["partitions"], spec["replicas"]) != (
                settings.partitions,
                settings.replication_factor,
            ):
                problems.append(f"chart: KafkaTopic {topic} partitions/replicas differ")
            want = expected_config(settings, topic)
            if {k: str(v) for k, v in (spec.get("config") or {}).items()} != want:
                problems.append(f"chart: KafkaTopic {topic} config {spec.get('config')} != {want}")
        if extra := set(kafka_topics) - {settings.topic(t) for t in TOPICS}:
            problems.append(f"chart: KafkaTopics not in the catalogue: {sorted(extra)}")
    elif values["topics"]["job"]["enabled"]:
        if len(jobs) != 1:
            problems.append(f"chart: expected one topics Job, found {len(jobs)}")
        else:
            job = jobs[0]
            hooks = job["metadata"].get("annotations", {}).get("helm.sh/hook", "")
            if set(hooks.split(",")) != {"pre-install", "pre-upgrade"}:
                problems.append(f"chart: the topics Job hooks are {hooks!r}")
            (c,) = job["spec"]["template"]["spec"]["containers"]
            if c.get("args") != ["topics", "create"]:
                problems.append(f"chart: the topics Job runs {c.get('args')!r}")
            env = {e["name"]: e.get("value") for e in c.get("env") or []}
            for key, value in (
                ("RUNPLANE_TOPIC_PREFIX", settings.topic_prefix),
                ("RUNPLANE_PARTITIONS", str(settings.partitions)),
                ("RUNPLANE_REPLICATION_FACTOR", str(settings.replication_factor)),
                ("RUNPLANE_BOOTSTRAP_SERVERS", kafka["bootstrapServers"]),
            ):
                if env.get(key) != value:
                    problems.append(f"chart: the topics Job sets {key}={env.get(key)!r}")
    return problems


# --- tests: the code's truth itself ------------------------------------------------------------


def test_the_services_are_the_designs() -> None:
    assert set(SERVICES) == set(DESIGN_SERVICES)
    assert len(set(SERVICE_PORTS.values())) == len(SERVICES)


def test_service_port_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SERVICES:
        monkeypatch.setenv(f"RUNPLANE_{name.upper()}_PORT", "9999")
        assert Settings().http_port(name) == 9999


# --- tests: docker-compose.yml -----------------------------------------------------------------


def test_compose_matches_the_code() -> None:
    assert compose_problems(load_compose()) == []


def test_compose_kafka_is_a_single_kraft_node_with_replication_one() -> None:
    kafka = load_compose()["services"]["kafka"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"])
    env = compose_env(kafka)
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    for key in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
    ):
        assert env[key] == "1", key
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    # The host listener is the local default, so the CLI on the host needs no configuration.
    assert "127.0.0.1:19092:19092" in kafka["ports"]
    assert "127.0.0.1:19092" in Settings().bootstrap_servers


def test_compose_calendars_parse() -> None:
    content = load_compose()["configs"]["calendars"]["content"]
    CalendarRegistry.from_mapping(yaml.safe_load(content))


@pytest.mark.parametrize("name", SERVICES)
def test_compose_check_catches_a_removed_service(name: str) -> None:
    doc = load_compose()
    del doc["services"][name]
    assert any(f"service {name} is missing" in p for p in compose_problems(doc))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["services"].pop("topics"),
        lambda d: d["services"]["topics"].update(command=["topics", "describe"]),
        lambda d: d["services"]["executor"]["depends_on"].pop("topics"),
        lambda d: d["services"]["journal"].update(ports=["8307:8306"]),
        lambda d: d["services"]["cases"]["environment"].update(RUNPLANE_NOT_A_SETTING="1"),
        lambda d: d["services"]["admission"]["environment"].pop("RUNPLANE_REDIS_URL"),
        lambda d: d["services"]["worklist"].update(image="someone/else:1"),
        lambda d: d["services"]["worklist"].update(ports=["8305:8305"]),
        lambda d: d["services"]["redis"].update(ports=["16379:6379"]),
        lambda d: d["services"]["executor"]["healthcheck"].update(
            test=["CMD", "curl", "-f", "http://127.0.0.1:8302/livez"]
        ),
    ],
    ids=[
        "no-topics-job",
        "wrong-topics-command",
        "no-topics-dep",
        "port",
        "env",
        "missing-env",
        "image",
        "all-interfaces",
        "redis-all-interfaces",
        "healthcheck-not-readiness",
    ],
)
def test_compose_check_catches_drift(mutate: Callable[[dict[str, Any]], object]) -> None:
    doc = load_compose()
    mutate(doc)
    assert compose_problems(doc) != []


# --- tests: the chart --------------------------------------------------------------------------


def test_chart_values_list_every_topic_of_the_catalogue() -> None:
    assert values_topic_problems(chart_values()) == []


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.stem if v else "default")
def test_chart_renders_consistently(helm: str, values: Path | None) -> None:
    docs = render_cached(helm, values)
    assert chart_problems(chart_values(extra=values), docs) == []


def test_the_ci_values_cover_strimzi_servicemonitors_and_the_lag_autoscaler(helm: str) -> None:
    kinds: set[str] = set()
    lag = False
    for values in CI_VALUES:
        for doc in render_cached(helm, values):
            kinds.add(doc["kind"])
            if doc["kind"] == "HorizontalPodAutoscaler":
                lag |= any(m["type"] == "External" for m in doc["spec"]["metrics"])
    assert {"KafkaTopic", "ServiceMonitor"} <= kinds
    assert lag


@pytest.mark.parametrize(
    "probe, path", [("livenessProbe", "/healthz"), ("readinessProbe", "/livez")]
)
def test_chart_check_catches_a_probe_on_the_wrong_endpoint(
    helm: str, probe: str, path: str
) -> None:
    docs = render_cached(helm, None)
    (worklist,) = [d for d in _of_kind(docs, "StatefulSet") if _component(d) == "worklist"]
    worklist["spec"]["template"]["spec"]["containers"][0][probe]["httpGet"]["path"] = path
    problems = chart_problems(chart_values(), docs)
    assert problems == [f"chart: worklist {probe} is not GET {PROBE_PATHS[probe]} on its port"]


def test_chart_wires_the_transaction_timeout_into_the_services_that_read_it(helm: str) -> None:
    result = helm_template(
        helm, CHART, None, "kafka.transactionTimeoutSeconds=20", "services.cases.replicas=2"
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    seen: dict[str, str | None] = {}
    for w in _of_kind(docs, "StatefulSet", "Deployment"):
        (c,) = w["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        seen |= {k: v for k, v in env.items() if k.endswith("_TRANSACTION_TIMEOUT_MS")}
    assert seen == {name: "20000" for name in TRANSACTION_TIMEOUT_ENV.values()}
    assert set(TRANSACTION_TIMEOUT_ENV.values()) <= env_names_read_by_code()


def _pod_templates(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return {_component(d): d["spec"]["template"] for d in _of_kind(docs, "StatefulSet")}


def test_a_token_rotation_restarts_no_pod_and_a_key_rotation_only_the_executor(
    helm: str,
) -> None:
    """Principals are re-read from the mounted file; only env-bound keys need a restart."""

    def pods(*sets: str) -> dict[str, Any]:
        result = helm_template(helm, CHART, None, "secret.openaiApiKey=sk-1", *sets)
        assert result.returncode == 0, result.stderr
        return _pod_templates([d for d in yaml.safe_load_all(result.stdout) if d])

    before = pods()
    rotated_token = pods(
        "secret.principals.principals[0].name=ada",
        "secret.principals.principals[0].token_sha256=" + "ab" * 32,
        "secret.principals.principals[0].roles={approver}",
    )
    assert rotated_token == before
    rotated_key = pods("secret.openaiApiKey=sk-2")
    assert {n for n in before if rotated_key[n] != before[n]} == {"executor"}


def test_a_kafka_password_rotation_restarts_only_its_service(helm: str) -> None:
    sasl = ["kafka.security.protocol=SASL_SSL", "kafka.security.saslMechanism=SCRAM-SHA-512"]
    passwords = [f"secret.kafkaPasswords.{name}=pw-{name}" for name in SERVICES]

    def pods(*sets: str) -> dict[str, Any]:
        result = helm_template(helm, CHART, None, *sasl, *passwords, *sets)
        assert result.returncode == 0, result.stderr
        return _pod_templates([d for d in yaml.safe_load_all(result.stdout) if d])

    before = pods()
    after = pods("secret.kafkaPasswords.cases=rotated")
    assert {n for n in before if after[n] != before[n]} == {"cases"}


def _ingresses(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {_component(d): d for d in _of_kind(docs, "Ingress")}


def test_no_ingress_by_default(helm: str) -> None:
    assert _ingresses(render_cached(helm, None)) == {}


def test_the_ingresses_route_tls_hosts_to_their_service(helm: str) -> None:
    values_file = CHART / "ci" / "monitoring-values.yaml"
    values = chart_values(extra=values_file)
    docs = render_cached(helm, values_file)
    services = {_component(d): d for d in _of_kind(docs, "Service")
                if d["spec"].get("clusterIP") != "None"}  # fmt: skip
    ingresses = _ingresses(docs)
    assert set(ingresses) == {"worklist", "journal"}
    for name, ing in ingresses.items():
        host = values["ingress"][name]["host"]
        spec = ing["spec"]
        assert spec["ingressClassName"] == "nginx"
        assert spec["tls"][0]["hosts"] == [host] and spec["tls"][0]["secretName"]
        ((rule,),) = [[r for r in spec["rules"] if r["host"] == host]]
        backend = rule["http"]["paths"][0]["backend"]["service"]
        assert backend == {"name": services[name]["metadata"]["name"], "port": {"name": "http"}}
    workloads = {_component(d): d for d in _of_kind(docs, "StatefulSet", "Deployment")}
    env = {
        n: {
            e["name"]: e.get("value") for e in w["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        for n, w in workloads.items()
    }
    origin = f"https://{values['ingress']['worklist']['host']}"
    assert env["worklist"]["RUNPLANE_WORKLIST_PUBLIC_ORIGIN"] == origin
    assert all(
        "RUNPLANE_WORKLIST_PUBLIC_ORIGIN" not in e for n, e in env.items() if n != "worklist"
    )
    # The journal's runs UI: its origin, and the worklist's task pages link runs there.
    runs = f"https://{values['ingress']['journal']['host']}"
    assert env["journal"]["RUNPLANE_JOURNAL_PUBLIC_ORIGIN"] == runs
    assert env["worklist"]["RUNPLANE_WORKLIST_RUNS_UI"] == runs
    # ... and the run page links the task a run waits on to the worklist's page.
    assert env["journal"]["RUNPLANE_JOURNAL_WORKLIST_UI"] == origin
    (cm,) = [d for d in _of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-env")]
    assert cm["data"]["RUNPLANE_FORWARDED_ALLOW_IPS"] == values["http"]["forwardedAllowIps"]


def test_tracing_is_off_by_default_and_one_value_turns_it_on_everywhere(helm: str) -> None:
    def otel(*sets: str) -> dict[str, dict[str, str]]:
        result = helm_template(helm, CHART, None, *sets)
        assert result.returncode == 0, result.stderr
        docs = [d for d in yaml.safe_load_all(result.stdout) if d]
        return {
            _component(w): {
                e["name"]: e.get("value")
                for e in w["spec"]["template"]["spec"]["containers"][0]["env"]
                if e["name"].startswith("OTEL_")
            }
            for w in _of_kind(docs, "StatefulSet", "Deployment")
        }

    assert all(not e for e in otel().values())
    on = otel("tracing.otlpEndpoint=http://collector:4318")
    assert on and all(
        e == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
              "OTEL_SERVICE_NAME": f"runplane-{name}"}
        for name, e in on.items()
    )  # fmt: skip


def render_notes(helm: str, tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as `helm install` would print it (helm template skips NOTES: render a copy
    of it as a ConfigMap of a copy of the chart)."""
    chart = tmp_path / "runplane"
    shutil.copytree(CHART, chart)
    (chart / "notes.txt").write_text((CHART / "templates" / "NOTES.txt").read_text())
    (chart / "templates" / "NOTES.txt").unlink()
    (chart / "templates" / "notes-as-configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n'
    )
    result = helm_template(helm, chart, None, *sets)
    assert result.returncode == 0, result.stderr
    (notes,) = [
        d for d in yaml.safe_load_all(result.stdout) if d and d["metadata"]["name"] == "notes"
    ]
    return str(notes["data"]["notes"])


def test_the_notes_never_print_the_redis_password(helm: str, tmp_path: Path) -> None:
    notes = render_notes(helm, tmp_path, "redis.url=redis://:hunter2@redis.db:6379/0")
    assert "Redis:  redis://redis.db:6379/0" in notes
    assert "hunter2" not in notes
    from_secret = render_notes(helm, tmp_path / "s", "redis.existingSecret=rp-redis")
    assert "Redis:  from Secret rp-redis" in from_secret


def test_chart_calendars_parse(helm: str) -> None:
    for values in (None, *CI_VALUES):
        for doc in render_cached(helm, values):
            if doc["kind"] == "ConfigMap" and "calendars.yaml" in (doc.get("data") or {}):
                CalendarRegistry.from_mapping(yaml.safe_load(doc["data"]["calendars.yaml"]))


def test_a_policy_value_is_the_file_the_executor_reads(helm: str, tmp_path: Path) -> None:
    from runplane.core.policy import parse_policy

    example = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
    values = tmp_path / "policy-values.yaml"
    values.write_text(yaml.safe_dump({"policy": example}))
    result = helm_template(helm, CHART, values)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    (tools,) = [d for d in _of_kind(docs, "ConfigMap") if "tools.yaml" in (d.get("data") or {})]
    rendered = parse_policy(tools["data"]["policy.yaml"])
    assert rendered.digest == parse_policy(yaml.safe_dump(example)).digest
    (env_cm,) = [d for d in _of_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-env")]
    assert env_cm["data"]["RUNPLANE_POLICY"] == "/etc/runplane/tools/policy.yaml"
    # No policy value: no file, no variable.
    plain = render_cached(helm, None)
    assert all("RUNPLANE_POLICY" not in (d.get("data") or {}) for d in _of_kind(plain, "ConfigMap"))


def principals_problems(content: str, where: str) -> Problems:
    """The principals file parses as the worklist and the journal read it (runplane.serving.auth)."""
    from runplane.serving.auth import Principals

    try:
        Principals.from_data(yaml.safe_load(content), where)
    except Exception as exc:  # ConfigError, or worse: either way the file is unusable
        return [f"{where}: {exc}"]
    return []


def test_compose_principals_parse() -> None:
    content = load_compose()["configs"]["worklist-principals"]["content"]
    assert principals_problems(content, "compose") == []


def test_chart_principals_parse(helm: str) -> None:
    for values in (None, *CI_VALUES):
        for doc in render_cached(helm, values):
            if doc["kind"] == "Secret" and "principals.yaml" in (doc.get("stringData") or {}):
                where = f"chart ({values.stem if values else 'default'})"
                assert principals_problems(doc["stringData"]["principals.yaml"], where) == []


def test_principals_check_catches_a_bad_file() -> None:
    assert principals_problems("principals: [{name: ada, token_sha256: nope}]", "x") != []


def _chart_copy(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    chart = tmp_path / "runplane"
    shutil.copytree(CHART, chart)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    edit(values)
    (chart / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    return chart


@pytest.mark.parametrize("name", SERVICES)
def test_chart_check_catches_a_removed_service(helm: str, tmp_path: Path, name: str) -> None:
    chart = _chart_copy(tmp_path, lambda v: v["services"].pop(name))
    problems = chart_problems(chart_values(chart), render(helm, chart))
    assert any(f"no workload for service {name}" in p for p in problems), problems


@pytest.mark.parametrize("name", TOPICS)
def test_chart_check_catches_a_removed_topic(helm: str, tmp_path: Path, name: str) -> None:
    def edit(values: dict[str, Any]) -> None:
        values["topics"]["strimzi"]["enabled"] = True
        values["topics"]["catalogue"] = [
            t for t in values["topics"]["catalogue"] if t["name"] != name
        ]

    chart = _chart_copy(tmp_path, edit)
    problems = chart_problems(chart_values(chart), render(helm, chart))
    assert any(f"no KafkaTopic for topic {name} " in p for p in problems), problems
    assert any(f"lacks ['{name}']" in p for p in problems), problems


@pytest.mark.parametrize(
    "sets, message",
    [
        (["services.executor.autoscaling.maxReplicas=7"], "must be <= kafka.partitions"),
        (
            ["defaults.terminationGracePeriodSeconds=30"],
            "must be >= the longest transaction timeout (60s",
        ),
        (
            ["kafka.transactionTimeoutSeconds=90"],
            "terminationGracePeriodSeconds (75) must be >= the longest transaction timeout (90s",
        ),
        (["http.forwardedAllowIps=ingress-nginx"], "forwardedAllowIps"),
        (["http.worklistPublicOrigin=worklist.example.com"], "worklistPublicOrigin"),
        (["ingress.enabled=true", "ingress.worklist.host="], "/ingress/worklist/host"),
        (["services.admission.replicas=7"], "must be <= kafka.partitions"),
        (["services.billing.port=8399"], "additional properties 'billing' not allowed"),
        (["secret.create=false"], "secret.existingSecret is required"),
    ],
)
def test_chart_refuses_broken_values(helm: str, sets: list[str], message: str) -> None:
    result = helm_template(helm, CHART, None, *sets)
    assert result.returncode != 0
    assert message in result.stderr


def test_helm_check_script_passes(helm: str, tmp_path: Path) -> None:
    """scripts/helm-check.sh: helm lint, kubeconform on every value set, docker compose config."""
    env = {**os.environ, "HELM_CHECK_OUT": str(tmp_path)}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "helm-check.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


# --- tests: image, Dockerfile ------------------------------------------------------------------


def test_one_image_everywhere(helm: str) -> None:
    chart_yaml = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart_yaml["appVersion"] == project_version()
    assert chart_values()["image"]["repository"] == expected_image().split(":")[0]
    images = {c["image"] for d in render_cached(helm, None) for c in _containers(d)}
    images |= {compose_image(s) for n, s in load_compose()["services"].items() if "image" in s
               and n not in ("kafka", "redis")}  # fmt: skip
    assert images == {expected_image()}


def _containers(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    template = (doc.get("spec") or {}).get("template") or {}
    return list((template.get("spec") or {}).get("containers") or [])


def _dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def test_dockerfile_is_multi_stage_non_root_and_serves_by_argument() -> None:
    text = DOCKERFILE.read_text()
    instructions = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", " "))]
    froms = [ln for ln in instructions if ln.startswith("FROM ")]
    assert len(froms) >= 2 and "pip wheel" in text
    user = [ln.split()[1] for ln in instructions if ln.startswith("USER ")]
    assert user and not user[-1].startswith(("root", "0"))
    assert 'ENTRYPOINT ["runplane"]' in instructions
    assert 'CMD ["serve", "all"]' in instructions
    for port in SERVICE_PORTS.values():
        assert str(port) in next(ln for ln in instructions if ln.startswith("EXPOSE"))


def test_dockerfile_copies_only_what_exists_and_is_not_ignored() -> None:
    ignored = _dockerignore_patterns()
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("COPY ") or "--from=" in line:
            continue
        sources = [w for w in line.split()[1:-1] if not w.startswith("--")]
        for src in sources:
            if src.endswith("*"):
                continue  # optional file (README.md*)
            assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
            assert src.rstrip("/") not in ignored, f".dockerignore excludes {src}"
    for needed in ("libs", "services", "pyproject.toml"):
        assert needed not in ignored


# --- tests: metrics ----------------------------------------------------------------------------

_METRIC_CALLS = {"Counter", "Gauge", "Histogram", "Summary"}


@cache
def metrics_defined_in_code() -> dict[str, str]:
    """Exposed metric name → where it is defined."""
    found: dict[str, str] = {}
    for path in _python_sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            first = node.args[0]
            if kind not in _METRIC_CALLS or not isinstance(first, ast.Constant):
                continue
            name = first.value
            if not isinstance(name, str) or not name.startswith("runplane_"):
                continue
            if kind == "Counter" and not name.endswith("_total"):
                name += "_total"  # prometheus-client exposes counters with the suffix
            found[name] = str(path.relative_to(ROOT))
    return found


def documented_metrics() -> set[str]:
    return set(re.findall(r"^\| `(runplane_[a-z0-9_]+)` \|", METRICS_DOC.read_text(), re.M))


def dashboard_metrics() -> set[str]:
    exprs = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    exprs.append(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(DASHBOARD.read_text()))
    names = set(re.findall(r"\b(runplane_[a-z0-9_]+)", " ".join(exprs)))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def test_every_metric_in_the_code_is_documented() -> None:
    missing = {n: where for n, where in metrics_defined_in_code().items()
               if n not in documented_metrics()}  # fmt: skip
    assert not missing, f"add these to docs/metrics.md: {missing}"


def emitted_rows(doc: str) -> set[str]:
    """The names in the doc's "Emitted" table (not the "Named, not emitted yet" one)."""
    section = doc.split("## Emitted", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(runplane_[a-z0-9_]+)` \|", section, re.M))


def test_every_emitted_row_is_still_in_the_code() -> None:
    """docs/metrics.md promises this: a metric renamed or removed leaves no stale row."""
    stale = emitted_rows(METRICS_DOC.read_text()) - set(metrics_defined_in_code())
    assert not stale, f"docs/metrics.md lists metrics no code defines: {sorted(stale)}"


def test_the_stale_row_check_can_fail() -> None:
    doc = METRICS_DOC.read_text().replace(
        "| --- | --- | --- | --- | --- |\n",
        "| --- | --- | --- | --- | --- |\n| `runplane_gone_total` | counter | — | x | removed |\n",
        1,
    )
    assert "runplane_gone_total" in emitted_rows(doc) - set(metrics_defined_in_code())


def test_the_dashboard_draws_only_documented_metrics() -> None:
    assert dashboard_metrics() - documented_metrics() == set()


def test_the_dashboard_json_is_generated() -> None:
    """helm/runplane/dashboards/runplane.json is what generate.py makes (run it after edits)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "dashboard_gen", DASHBOARD.with_name("generate.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert json.loads(DASHBOARD.read_text()) == module.build(), (
        "stale: python helm/runplane/dashboards/generate.py"
    )


def test_the_dashboard_ships_in_the_chart(helm: str) -> None:
    (cm,) = [d for d in render_cached(helm, None) if d["metadata"]["name"].endswith("-dashboard")]
    assert json.loads(cm["data"]["runplane.json"])["uid"] == "runplane-overview"


# --- tests: the commands the artifacts run exist -------------------------------------------------


def test_the_topics_command_exists() -> None:
    import typer.main

    from runplane.cli import app

    root = typer.main.get_command(app)
    topics = root.commands["topics"]  # type: ignore[attr-defined]
    assert "create" in topics.commands
