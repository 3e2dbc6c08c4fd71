"""The tools config: HTTP tools, model providers and MCP servers an executor offers. Pure.

One YAML file (``RUNPLANE_TOOLS_CONFIG``), mounted by the chart and compose, read by the
executor (to serve the calls) and by admission (to refuse a run whose agent needs a tool or
model the executor does not offer)::

    tools:                         # HTTP tools: one request each
      - name: fetch_invoice
        method: GET
        url: ${BILLING_URL:-http://127.0.0.1:8398}/invoices/{invoice_id}
        mutating: false            # the effect declaration, as EffectDecl
        recovery: retry            # retry | reconcile (+ probe) | requires_operator
        timeout_s: 10
        sensitivity: confidential  # label of what it returns (trust, sensitivity)
        description: The invoice's amount and currency.   # what a model is told of it
        input_schema: {type: object, properties: {invoice_id: {type: string}}}
        auth: {secret_env: BILLING_TOKEN}      # header Authorization: Bearer $BILLING_TOKEN
    models:                        # model providers, by the name ctx.generate uses
      - {name: openai, api: openai, base_url: https://api.openai.com/v1, model: gpt-4o-mini,
         secret_env: OPENAI_API_KEY}
      - {name: claude, api: anthropic, base_url: https://api.anthropic.com,
         model: claude-sonnet-4-5, secret_env: ANTHROPIC_API_KEY}
    mcp_servers:                   # tools on MCP servers: tool://{server}/{tool}
      - name: files
        command: [python, -m, my_mcp_server]   # stdio; or url: http://host/mcp
        tools: [{name: read_file, mutating: false}]   # schema: the server's listed one

``${NAME}`` / ``${NAME:-default}`` in ``url``, ``base_url`` and ``command`` are filled from the
environment (``{name}`` without ``$`` stays a tool's argument placeholder). A secret never
appears in the file: ``auth`` names the environment variable holding it (``secret_env``),
and a key such as ``api_key`` or ``token`` is refused. The secret itself is read only when
the executor builds the clients (``runplane.providers.catalog``), so admission, which needs
only the names, never sees it.

Besides the providers a file declares, it offers the platform's one OpenAI-compatible
provider, ``openai``, from ``RUNPLANE_OPENAI_BASE_URL`` / ``_MODEL`` / ``_API_KEY`` (the
executor's defaults), unless it declares a provider of that name itself.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runplane.core.agents import EffectDecl, Recovery, RetryPolicy
from runplane.errors import ConfigError
from runplane.providers._schema import declared_schema

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# A key that would put a secret in the file; secrets come from the environment only.
_SECRET_KEYS = frozenset({"api_key", "apikey", "token", "password", "secret", "authorization"})
MODEL_APIS = ("openai", "anthropic")
_DECL_KEYS = {
    "mutating",
    "recovery",
    "probe",
    "timeout_s",
    "max_attempts",
    "trust",
    "sensitivity",
    "description",
    "input_schema",
}


@dataclass(frozen=True)
class Auth:
    """A header whose value is ``{scheme} ${secret_env}`` (scheme "" sends the bare value)."""

    secret_env: str
    header: str = "Authorization"
    scheme: str = "Bearer"


@dataclass(frozen=True)
class ToolDecl:
    """A tool's effect declaration and the label of what it returns."""

    decl: EffectDecl
    trust: str | None = None
    sensitivity: str | None = None


@dataclass(frozen=True)
class HttpToolSpec:
    name: str
    method: str
    url: str
    declared: ToolDecl
    auth: Auth | None = None
    not_found_is_none: bool = False


@dataclass(frozen=True)
class ModelSpec:
    name: str
    api: str
    base_url: str
    model: str
    auth: Auth | None = None


@dataclass(frozen=True)
class McpServerSpec:
    """An MCP server: stdio (``command``) or streamable HTTP (``url``), and the tools of it
    the executor offers, each with its declaration (MCP's own hints are not trusted for
    recovery: a server saying "read-only" does not make a crash safe to repeat)."""

    name: str
    tools: tuple[ToolDecl, ...]
    command: tuple[str, ...] = ()
    url: str | None = None
    auth: Auth | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # ``{server}/{tool}`` → the schema digest the config pins (refused at start if it moved).
    pins: Mapping[str, str] = field(default_factory=dict)

    def remote_name(self, tool: str) -> str:
        """The server's own name for the tool agents call ``{server}/{tool}``."""
        return tool.removeprefix(f"{self.name}/")


@dataclass(frozen=True)
class ToolsConfig:
    tools: tuple[HttpToolSpec, ...] = ()
    models: tuple[ModelSpec, ...] = ()
    mcp_servers: tuple[McpServerSpec, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for name in self.tool_names():
            if name in seen:
                raise ConfigError(f"tools config: tool {name!r} is declared twice")
            seen.add(name)
        if len({m.name for m in self.models}) != len(self.models):
            raise ConfigError("tools config: a model provider name is declared twice")

    def tool_names(self) -> list[str]:
        names = [t.name for t in self.tools]
        for server in self.mcp_servers:
            names.extend(t.decl.name for t in server.tools)
        return names

    def model_names(self) -> frozenset[str]:
        return frozenset(m.name for m in self.models)


def interpolate(text: str, env: Mapping[str, str], where: str) -> str:
    """Fill ``${NAME}`` / ``${NAME:-default}`` from ``env``; an unset name with no default is
    a ``ConfigError`` naming it (a URL with a hole in it would fail every call)."""

    def fill(match: re.Match[str]) -> str:
        value = env.get(match.group(1))
        if value:
            return value
        if match.group(2) is not None:
            return match.group(2)
        raise ConfigError(f"{where}: environment variable {match.group(1)} is not set")

    return _VAR.sub(fill, text)


def default_models(env: Mapping[str, str]) -> tuple[ModelSpec, ...]:
    """The one ``openai`` provider of ``RUNPLANE_OPENAI_*``, for a file that names none."""
    return (
        ModelSpec(
            name="openai",
            api="openai",
            base_url=env.get("RUNPLANE_OPENAI_BASE_URL") or "http://127.0.0.1:8399/v1",
            model=env.get("RUNPLANE_OPENAI_MODEL") or "gpt-4o-mini",
            auth=Auth("RUNPLANE_OPENAI_API_KEY"),
        ),
    )


def load_tools_config(path: str | Path | None, env: Mapping[str, str]) -> ToolsConfig:
    """Read and validate the file at ``path``; ``None`` → no tools, the default model.

    ``path`` may name several files, comma-separated (``examples/tools/billing.yaml,
    examples/tools/quote.yaml``: the examples' tools and one's own): their tools, models and
    MCP servers together, a name declared twice refused."""
    if path is None:
        return ToolsConfig(models=default_models(env))
    paths = [p.strip() for p in str(path).split(",") if p.strip()]
    if len(paths) > 1:
        parts = [load_tools_config(p, env) for p in paths]
        declared = [m for part in parts for m in part.models if m not in default_models(env)]
        return ToolsConfig(
            tools=tuple(t for part in parts for t in part.tools),
            models=_with_default(tuple(declared), env),
            mcp_servers=tuple(s for part in parts for s in part.mcp_servers),
        )
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"RUNPLANE_TOOLS_CONFIG: cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"RUNPLANE_TOOLS_CONFIG: {path} is not YAML: {exc}") from exc
    return parse_tools_config(doc or {}, env, source=str(path))


def parse_tools_config(doc: Any, env: Mapping[str, str], *, source: str) -> ToolsConfig:
    _mapping(doc, source, {"tools", "models", "mcp_servers"})
    tools = tuple(
        _http_tool(t, env, f"{source}: tools[{i}]") for i, t in enumerate(_list(doc, "tools"))
    )
    models = tuple(
        _model(m, env, f"{source}: models[{i}]") for i, m in enumerate(_list(doc, "models"))
    )
    servers = tuple(
        _mcp_server(s, env, f"{source}: mcp_servers[{i}]")
        for i, s in enumerate(_list(doc, "mcp_servers"))
    )
    return ToolsConfig(tools=tools, models=_with_default(models, env), mcp_servers=servers)


def _with_default(models: tuple[ModelSpec, ...], env: Mapping[str, str]) -> tuple[ModelSpec, ...]:
    """The declared providers, and the default ``openai`` one unless they name it: adding a
    ``models:`` section adds providers, it does not take the default away."""
    names = {m.name for m in models}
    return models + tuple(d for d in default_models(env) if d.name not in names)


def _list(doc: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"tools config: {key} must be a list")
    return value


def _mapping(value: Any, where: str, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping")
    secret = sorted(k for k in value if str(k).lower() in _SECRET_KEYS)
    if secret:
        raise ConfigError(
            f"{where}: {secret[0]!r} would put a secret in the file; "
            "name the environment variable holding it: auth: {secret_env: NAME}"
        )
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigError(f"{where}: name must match {_NAME.pattern}, got {value!r}")
    return value


def _declared(name: str, raw: Mapping[str, Any], where: str) -> ToolDecl:
    if "mutating" not in raw:
        # As in manifests: a tool that forgets to describe itself would otherwise be treated
        # as mutating, requires_operator; say so at start-up instead of at the first crash.
        raise ConfigError(f"{where}: missing required field 'mutating' (true or false)")
    try:
        decl = EffectDecl(
            name,
            mutating=bool(raw["mutating"]),
            recovery=None if raw.get("recovery") is None else Recovery(raw["recovery"]),
            probe=raw.get("probe"),
            timeout_s=float(raw.get("timeout_s", 30.0)),
            retry=RetryPolicy(max_attempts=int(raw.get("max_attempts", 3))),
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise ConfigError(f"{where}: description must be a string")
    decl = dataclasses.replace(
        decl,
        description=description or "",
        input_schema=(
            None
            if raw.get("input_schema") is None
            else declared_schema(f"{name} ({where})", raw["input_schema"])
        ),
    )
    return ToolDecl(decl, trust=raw.get("trust"), sensitivity=raw.get("sensitivity"))


def _auth(raw: Any, where: str) -> Auth | None:
    if raw is None:
        return None
    m = _mapping(raw, f"{where}.auth", {"secret_env", "header", "scheme"})
    if not isinstance(m.get("secret_env"), str) or not m["secret_env"]:
        raise ConfigError(f"{where}.auth: secret_env (an environment variable name) is required")
    return Auth(
        secret_env=m["secret_env"],
        header=str(m.get("header", "Authorization")),
        scheme=str(m.get("scheme", "Bearer")),
    )


def _url(raw: Any, env: Mapping[str, str], where: str) -> str:
    if not isinstance(raw, str):
        raise ConfigError(f"{where}: a URL is required")
    url = interpolate(raw, env, where)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: URL must be http(s), got {url!r}")
    return url


def _http_tool(raw: Any, env: Mapping[str, str], where: str) -> HttpToolSpec:
    fields = {"name", "method", "url", "auth", "not_found_is_none"} | _DECL_KEYS
    m = _mapping(raw, where, fields)
    name = _name(m.get("name"), where)
    return HttpToolSpec(
        name=name,
        method=str(m.get("method", "GET")).upper(),
        url=_url(m.get("url"), env, f"{where}.url"),
        declared=_declared(name, m, where),
        auth=_auth(m.get("auth"), where),
        not_found_is_none=bool(m.get("not_found_is_none", False)),
    )


def _model(raw: Any, env: Mapping[str, str], where: str) -> ModelSpec:
    m = _mapping(raw, where, {"name", "api", "base_url", "model", "auth", "secret_env"})
    api = str(m.get("api", "openai"))
    if api not in MODEL_APIS:
        raise ConfigError(f"{where}: api must be one of {', '.join(MODEL_APIS)}, got {api!r}")
    if not isinstance(m.get("model"), str) or not m["model"]:
        raise ConfigError(f"{where}: model (the default model name) is required")
    auth = _auth(m.get("auth"), where)
    if auth is None and m.get("secret_env"):
        # Each API's own header: Bearer for OpenAI-compatible, x-api-key for Anthropic.
        auth = Auth(str(m["secret_env"]))
    return ModelSpec(
        name=_name(m.get("name"), where),
        api=api,
        base_url=_url(m.get("base_url"), env, f"{where}.base_url"),
        model=m["model"],
        auth=auth,
    )


def _mcp_server(raw: Any, env: Mapping[str, str], where: str) -> McpServerSpec:
    m = _mapping(raw, where, {"name", "command", "url", "auth", "env", "tools"})
    name = _name(m.get("name"), where)
    command = m.get("command")
    url = m.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where}: give exactly one of command (stdio) or url (streamable HTTP)")
    argv: tuple[str, ...] = ()
    if command is not None:
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(a, str) for a in command)
        ):
            raise ConfigError(f"{where}.command: a non-empty list of strings")
        argv = tuple(interpolate(a, env, f"{where}.command") for a in command)
    server_env = m.get("env") or {}
    if not isinstance(server_env, dict):
        raise ConfigError(f"{where}.env: a mapping of names to values")
    tools = []
    pins: dict[str, str] = {}
    for i, t in enumerate(m.get("tools") or []):
        tm = _mapping(t, f"{where}.tools[{i}]", {"name", "schema_digest"} | _DECL_KEYS)
        tool = _name(tm.get("name"), f"{where}.tools[{i}]")
        if tm.get("schema_digest"):
            pins[f"{name}/{tool}"] = str(tm["schema_digest"])
        # Declared under the name agents call it by, ``{server}/{tool}``: provenance
        # ``tool://{server}/{tool}``, and one namespace per server (two servers may both
        # have a ``search``).
        tools.append(_declared(f"{name}/{tool}", tm, f"{where}.tools[{i}]"))
    if not tools:
        raise ConfigError(f"{where}: list the tools the executor offers (tools: [...])")
    return McpServerSpec(
        name=name,
        tools=tuple(tools),
        command=argv,
        url=None if url is None else _url(url, env, f"{where}.url"),
        auth=_auth(m.get("auth"), where),
        env={str(k): interpolate(str(v), env, f"{where}.env") for k, v in server_env.items()},
        pins=pins,
    )
