"""CLI: ``runplane runs list|show|resume|fork`` (and ``journal erase``'s request).

``runs list`` reads the journal service's Redis run index; ``runs show`` reads it too and
falls back to folding the run's ``audit`` records.

Every command takes a run by its id or its admission key (``cli/journal.py``'s ``find_run``);
a run nobody knows is "no such run", exit 2.

The repair commands are operator actions (``runplane.core.repair``): they ask the journal
service's API (``RUNPLANE_JOURNAL_URL``, default http://127.0.0.1:8306) with your bearer token
(``RUNPLANE_WORKLIST_TOKEN``, the same principals file; the role ``operator`` is needed), which
names you in the order the run's executor journals. The answer is "accepted": the executor
applies the order, or dead-letters it with the reason if the run changed meanwhile — ``runs
show`` / ``journal verify`` show the outcome.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runplane.cli.emit import parse_case
from runplane.cli.journal import (
    _print_json,
    _ts,
    _verdict_cell,
    find_run,
    journal_app,
    no_such_run,
    result_of,
    result_rows,
)
from runplane.config import Settings
from runplane.core.keys import case_id_for
from runplane.core.repair import erased
from runplane.core.verify import verify_records
from runplane.journal.index import RunFilter, RunIndex
from runplane.journal.summary import summarize
from runplane.runs.read import read_audit, read_run
from runplane.wire import RunStatus, SessionSnapshot

DEFAULT_JOURNAL_URL = "http://127.0.0.1:8306"

runs_app = typer.Typer(
    help="Runs: list and inspect them (from the run index); resume or fork them (operators).",
    no_args_is_help=True,
)

Token = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="RUNPLANE_WORKLIST_TOKEN",
        help="Your bearer token (role operator). Prefer RUNPLANE_WORKLIST_TOKEN.",
        show_default=False,
    ),
]
JournalUrl = Annotated[
    str,
    typer.Option("--url", envvar="RUNPLANE_JOURNAL_URL", help="The journal service's base URL."),
]
Reason = Annotated[str, typer.Option("--reason", help="Why (journaled; at most 200 characters).")]


def request_repair(url: str, token: str, run_id: str, action: str, body: dict[str, Any]) -> Any:
    """POST an operator's repair to the journal API; exits 1 with its answer when refused."""
    if not token:
        raise _exit("a token is required: export RUNPLANE_WORKLIST_TOKEN or pass --token", 1)
    path = f"/runs/{quote(run_id, safe='')}/{action}"
    try:
        with httpx.Client(base_url=url or DEFAULT_JOURNAL_URL, timeout=60) as client:
            r = client.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise _exit(f"cannot reach the journal service at {url}: {exc}", 2) from exc
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        raise _exit(f"{r.status_code}: {detail}", 1)
    return r.json()


def _exit(message: str, code: int) -> typer.Exit:
    Console(stderr=True).print(f"[red]{message}[/red]", highlight=False)
    return typer.Exit(code)


RunArg = Annotated[str, typer.Argument(metavar="RUN", help="run id or admission key")]


def _repaired(run: str) -> str:
    """The run id of the run a repair names (by id or admission key): a repair needs the run's
    snapshot, so a run without one is "no such run" here, before the journal API is asked."""
    run_id, snap = find_run(Settings.from_env(), run)
    if snap is None:
        raise no_such_run(run)
    return run_id


@runs_app.command("resume")
def runs_resume(
    run_id: RunArg, token: Token = "", url: JournalUrl = DEFAULT_JOURNAL_URL, reason: Reason = ""
) -> None:
    """Replay a QUARANTINED or FAILED run again against the code deployed now."""
    run_id = _repaired(run_id)
    out = request_repair(url, token, run_id, "resume", {"reason": reason})
    typer.echo(f"{run_id}: resume accepted (by {out['by']})")


@runs_app.command("fork")
def runs_fork(
    run_id: RunArg,
    from_seq: int = typer.Option(..., "--from-seq", min=1, help="keep records 0..N-1"),
    token: Token = "",
    url: JournalUrl = DEFAULT_JOURNAL_URL,
    reason: Reason = "",
) -> None:
    """Start a new run from the first N records of RUN's chain; everything after runs again."""
    run_id = _repaired(run_id)
    out = request_repair(url, token, run_id, "fork", {"from_seq": from_seq, "reason": reason})
    typer.echo(f"{run_id}: forked at seq {from_seq} as {out['fork_id']} (by {out['by']})")


@journal_app.command("erase")
def journal_erase(
    run_id: RunArg,
    token: Token = "",
    url: JournalUrl = DEFAULT_JOURNAL_URL,
    reason: Reason = "",
    yes: bool = typer.Option(False, "--yes", "-y", help="erase without asking"),
) -> None:
    """Tombstone an ended run's bodies (asks first; ``--yes`` skips the question); its chain
    still verifies ("bodies erased"). Erased bodies cannot be brought back."""
    run_id = _repaired(run_id)
    if not yes:
        # Irreversible: a person confirms; a script says so with --yes (no answer = no).
        question = (
            f"erase every body of run {run_id} (input, output, results)? this cannot be undone"
        )
        try:
            confirmed = typer.confirm(question, default=False)
        except typer.Abort:  # no answer at all (stdin closed): no
            confirmed = False
        if not confirmed:
            raise _exit(f"{run_id}: not erased (pass --yes to erase without asking)", 1)
    out = request_repair(url, token, run_id, "erase", {"reason": reason})
    typer.echo(f"{run_id}: erase accepted (by {out['by']}); `runplane journal verify` shows it")


@runs_app.command("list")
def runs_list(
    status: RunStatus | None = typer.Option(None, help="only runs in this status"),
    capability: str | None = typer.Option(None),
    case: list[str] = typer.Option(
        [],
        "--case",
        help="only runs of this case: its id, or its business keys KEY=VALUE (repeatable, "
        "as emit took them)",
    ),
    tenant: str = typer.Option("default", "--tenant", help="whose business keys --case names"),
    since_ms: int | None = typer.Option(None, help="started at or after (ms since epoch)"),
    until_ms: int | None = typer.Option(None, help="started at or before (ms since epoch)"),
    limit: int = typer.Option(50, min=1, max=1000),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """List runs, newest first, from the journal service's run index."""

    settings = Settings.from_env()
    index = RunIndex.from_url(settings.redis_url, settings.topic_prefix)
    if index.offsets() is None:
        typer.echo("the run index is empty or missing: is the journal service running?", err=True)
        raise typer.Exit(1)
    case_id = case_of(case, tenant)
    runs = index.list(RunFilter(status, capability, case_id, since_ms, until_ms, limit))
    if as_json:
        _print_json([r.to_json() for r in runs])
        return
    table = Table(title=f"runs ({len(runs)})", title_justify="left")
    for col in (
        "run",
        "status",
        "capability",
        "case",
        "era",
        "tokens",
        "units",
        "started",
        "verdict",
    ):
        table.add_column(col, min_width=3 if col == "era" else None, overflow="fold")
    for r in runs:
        table.add_row(
            r.run_id,
            str(r.status or ""),
            r.capability or "",
            r.case_id or "",
            str(r.era),
            str(r.cost.tokens),
            f"{r.cost.units:g}",
            _ts(r.started_ms),
            _verdict_cell(r.verdict) if r.erased_bodies is None else r.shown_verdict,
        )
    Console().print(table)


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., metavar="RUN", help="run id or admission key"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One run: status, how it ended (output, or why it failed and who cancelled it), its
    input, capability, case, era, cost, timestamps, what it is parked on."""
    settings = Settings.from_env()
    asked = run_id
    run_id, snap = find_run(settings, asked)
    summary = RunIndex.from_url(settings.redis_url, settings.topic_prefix).get(run_id)
    if summary is None:
        audits = read_audit(settings, run_id)
        if not audits:
            raise no_such_run(asked)
        summary = summarize(run_id, audits)
    if summary.erased_bodies is None:  # an erasure older than RUN_ERASED, or not indexed yet
        erased_bodies = _erased_bodies(settings, run_id, snap)
        summary = replace(summary, erased_bodies=erased_bodies)
    data = summary.to_json()
    if as_json:
        _print_json({**data, **result_of(snap)})
        return
    data["verdict"] = summary.shown_verdict
    table = Table(title=f"run {run_id}", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for k in (
        "status",
        "capability",
        "case_id",
        "era",
        "records",
        "parked_on",
        "verdict",
        "broken_at_seq",
        "reason",
        "ended_reason",
        "error_type",
        "cancelled_by",
    ):
        table.add_row(k, "" if data[k] is None else str(data[k]))
    for name, text in result_rows(snap):
        table.add_row(name, escape(text))
    version = (summary.parked_on or "").removeprefix("version:")
    if version != (summary.parked_on or ""):
        table.add_row(
            "why",
            f"[yellow]version {version} is not deployed[/yellow]: parked, not failed; its inbox "
            "records are held and served when an executor hosting that line takes it "
            "(`runplane agents list`)",
        )
    c = summary.cost
    table.add_row("cost", f"{c.tokens_in} in + {c.tokens_out} out tokens, {c.units:g} units")
    for k in ("started_ms", "updated_ms", "ended_ms"):
        table.add_row(k.removesuffix("_ms"), _ts(data[k]))
    Console().print(table)


def case_of(given: list[str], tenant: str) -> str | None:
    """The case id ``--case`` names: a case id as it is, or the one admission resolved these
    business keys to for ``tenant`` (``core.keys.case_id_for``, the same hash)."""
    if not given:
        return None
    if len(given) == 1 and "=" not in given[0]:
        return given[0]
    return case_id_for(tenant, parse_case(given))


def _erased_bodies(settings: Settings, run_id: str, snap: SessionSnapshot | None) -> int | None:
    """How many bodies an erased run lost (its chain's calls that carry one); None when the
    run was not erased. The index only knows the verdict the run had when it ended."""
    if snap is None or not erased(snap):
        return None
    records = read_run(settings, run_id, bodies=False).records
    return len(verify_records(run_id, records, {}).body_missing)


def register(app: typer.Typer) -> None:
    """Attach ``runs`` to the root app."""
    app.add_typer(runs_app, name="runs")
