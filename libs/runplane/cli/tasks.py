"""CLI: ``runplane tasks list|show|claim|release|decide`` — the worklist over its HTTP API.

Talks to the worklist service (``RUNPLANE_WORKLIST_URL``, default http://127.0.0.1:8305) with
a bearer token; who acts is whoever the token belongs to. Keep the token in
``RUNPLANE_WORKLIST_TOKEN`` (set it once per shell, e.g. ``read -rs RUNPLANE_WORKLIST_TOKEN;
export RUNPLANE_WORKLIST_TOKEN``): ``--token`` works too, but a credential on a command line
lands in shell history and in ``ps`` output. ``runplane principals new`` mints a token.
Exit codes: 0 done, 1 the worklist refused (the reason is printed), 2 the worklist could not be
reached.

    export RUNPLANE_WORKLIST_TOKEN   # after: read -rs RUNPLANE_WORKLIST_TOKEN
    runplane tasks list
    runplane tasks decide run-1/0/1 approve --comment "checked"

An operator task (a mutating call whose outcome is in doubt) takes a verdict instead:

    runplane tasks decide run-1/0/2/operator retry --comment "not in the ledger"
    runplane tasks decide run-1/0/2/operator happened --result '{"charge_id": "ch_1"}'
    runplane tasks decide run-1/0/2/operator abandon --comment "customer cancelled"
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import typer
from rich.console import Console
from rich.table import Table

DEFAULT_URL = "http://127.0.0.1:8305"

tasks_app = typer.Typer(
    help="Human tasks on the worklist: list, claim, decide.", no_args_is_help=True
)

Token = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="RUNPLANE_WORKLIST_TOKEN",
        help="Your bearer token. Prefer RUNPLANE_WORKLIST_TOKEN: a token on the command line "
        "ends up in shell history.",
        show_default=False,
    ),
]
Url = Annotated[
    str, typer.Option("--url", envvar="RUNPLANE_WORKLIST_URL", help="The worklist's base URL.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DECISIONS = ("approve", "reject", "retry", "abandon", "happened")


def _fail(message: str, code: int) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(
        f"[red]{message}[/red]", highlight=False, markup=True
    )
    return typer.Exit(code)


def _call(method: str, url: str, path: str, token: str, body: Any = None, **params: Any) -> Any:
    if not token:
        raise _fail(
            "a token is required: export RUNPLANE_WORKLIST_TOKEN (preferred) or pass --token", 1
        )
    headers = {"Authorization": f"Bearer {token}"}
    query = {k: v for k, v in params.items() if v is not None}
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            r = client.request(method, path, headers=headers, json=body, params=query)
    except httpx.HTTPError as exc:
        raise _fail(f"cannot reach the worklist at {url}: {exc}", 2) from exc
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        if not isinstance(detail, str):
            detail = json.dumps(detail)
        raise _fail(f"{r.status_code}: {detail}", 1)
    return r.json()


def _task_path(task_id: str, action: str = "") -> str:
    return "/api/tasks/" + quote(task_id, safe="/") + (f"/{action}" if action else "")


def _instant(ms: int | None) -> str:
    if ms is None:
        return "—"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _print_task(task: dict[str, Any]) -> None:
    console = Console(highlight=False)
    console.print(f"[bold]{task['question']}[/bold]", markup=True)
    rows = [
        ("task", task["task_id"]),
        ("status", task["status"] + (f" ({task['outcome']})" if task.get("outcome") else "")),
        ("run", f"{task['session_id']} · {task['capability']} · era {task['era']}"),
        ("case", task.get("case_id") or "—"),
        ("role", task["role"]),
        ("started by", task["initiator"]),
        ("approvals", f"{len(task['approved_by'])} of {task['approvals']} {task['approved_by']}"),
        ("claimed by", task.get("claimed_by") or "—"),
        ("expires", _instant(task.get("expires_ms"))),
        ("you may act", "yes" if task["you_may_act"] else f"no: {task.get('why_not')}"),
        ("answers", " | ".join(task.get("choices", []))),
    ]
    call = task.get("call")
    if call:
        rows.insert(1, ("call", call["name"]))
        if call.get("idempotency_key"):
            rows.insert(2, ("idem. key", call["idempotency_key"]))
    if task.get("comment"):
        rows.append(("comment", task["comment"]))
    for k, v in rows:
        console.print(f"  {k:<12} {v}", markup=False)
    shown = call["args"] if call else task["answer"]
    console.print("  arguments:" if call else "  answer:", markup=False)
    console.print(json.dumps(shown, indent=2, sort_keys=True), markup=False)


@tasks_app.command("list")
def list_tasks(
    token: Token = "",
    url: Url = DEFAULT_URL,
    status: Annotated[
        str | None, typer.Option(help="OPEN, CLAIMED, DECIDED, EXPIRED, CLOSED")
    ] = None,
    role: Annotated[str | None, typer.Option(help="Only tasks for this role.")] = None,
    case: Annotated[str | None, typer.Option(help="Only tasks of this case.")] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only tasks you may act on now.")] = False,
    limit: Annotated[int, typer.Option(help="Tasks per page (1-1000).")] = 200,
    cursor: Annotated[
        str | None, typer.Option(help="Continue after a previous page (its printed cursor).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List tasks (oldest open first, then finished ones newest first), a page at a time."""
    data = _call(
        "GET",
        url,
        "/api/tasks",
        token,
        status=status,
        role=role,
        case=case,
        actionable=mine or None,
        limit=limit,
        cursor=cursor,
    )
    tasks: list[dict[str, Any]] = data["tasks"]
    more = data.get("cursor")
    if as_json:
        typer.echo(json.dumps(tasks, indent=2))
        if more:
            typer.echo(f"more: --cursor {more}", err=True)
        return
    if not tasks:
        typer.echo("no tasks")
        return
    table = Table("task", "status", "role", "question", "approvals", "expires", "you")
    for t in tasks:
        table.add_row(
            t["task_id"],
            t["status"],
            t["role"],
            t["question"],
            f"{len(t['approved_by'])}/{t['approvals']}",
            _instant(t.get("expires_ms")),
            "may act" if t["you_may_act"] else "—",
        )
    Console().print(table)
    if more:
        typer.echo(f"more: runplane tasks list --cursor {more} (same filters)")


@tasks_app.command("show")
def show(task: str, token: Token = "", url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Show one task with the run's proposed answer."""
    data = _call("GET", url, _task_path(task), token)
    typer.echo(json.dumps(data, indent=2)) if as_json else _print_task(data)


@tasks_app.command("claim")
def claim(task: str, token: Token = "", url: Url = DEFAULT_URL) -> None:
    """Claim a task so nobody else decides it while you look."""
    data = _call("POST", url, _task_path(task, "claim"), token)
    typer.echo(f"{task}: {data['status']} by {data['claimed_by']}")


@tasks_app.command("release")
def release(task: str, token: Token = "", url: Url = DEFAULT_URL) -> None:
    """Give a claim back."""
    data = _call("POST", url, _task_path(task, "release"), token)
    typer.echo(f"{task}: {data['status']}")


@tasks_app.command("decide")
def decide(
    task: str,
    decision: Annotated[
        str,
        typer.Argument(
            help="approve or reject (approvals); retry, abandon or happened (operator tasks)"
        ),
    ],
    token: Token = "",
    url: Url = DEFAULT_URL,
    comment: Annotated[str, typer.Option(help="Goes to the run and the audit trail.")] = "",
    result: Annotated[
        str | None,
        typer.Option(help="With 'happened': the call's observed result, as JSON."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Decide a task; answered once the worklist has applied it."""
    if decision not in DECISIONS:
        raise typer.BadParameter(", ".join(DECISIONS), param_hint="DECISION")
    body: dict[str, Any] = {"decision": decision, "comment": comment}
    if result is not None:
        try:
            body["result"] = json.loads(result)
        except ValueError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--result") from exc
    data = _call("POST", url, _task_path(task, "decide"), token, body=body)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    elif data["status"] == "DECIDED" and data.get("call"):
        typer.echo(f"{task}: {decision} ({data['outcome']}) by {data['claimed_by']}")
    elif data["status"] == "DECIDED":
        by = data["approved_by"] if data["outcome"] == "APPROVED" else [data["claimed_by"]]
        typer.echo(f"{task}: {data['outcome']} by {', '.join(by)}")
    else:
        typer.echo(
            f"{task}: approved ({len(data['approved_by'])} of {data['approvals']}); waiting for more"
        )


def register(app: typer.Typer) -> None:
    """Attach the tasks commands to the root app."""
    app.add_typer(tasks_app, name="tasks")
