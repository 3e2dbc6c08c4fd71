"""CLI: ``runplane journal show|verify|erase|keygen``.

``journal show`` and ``journal verify`` read the run's partition of ``journal`` and
``results`` straight from Kafka — independent of the journal service — and run the same chain
fold the service runs, so the two agree. ``journal erase`` is an operator's request to the
journal service's API (``cli/runs.py`` says how the CLI reaches it).

RUN is a run id or the admission key it was admitted under (``runplane.runs.operate.lookup``,
the resolver ``signal`` and ``cancel`` use); a run nobody knows is "no such run", exit 2, in
every command that takes one. ``journal show`` also prints the run's input and output (or what
it failed with) from its latest snapshot: a reader with access to ``sessions`` may read bodies.

Exit status of ``journal verify``: 0 the chain verifies (erased bodies allowed, also once the
log cleaner removed the tombstones of an erased run: its snapshot says so), 1 broken, 2 intact
but some bodies are absent from ``results`` — or no such run (the message says which).
``--json`` prints the report with ``verdict`` (VERIFIED / BROKEN / BODY_MISSING, the audit
stream's symbols). Several runs (``verify A B C``, ``--all``, ``--since 12h``) are verified in
one process: a line per run and a summary (``--json``: ``{"runs": [...], "summary": {...},
"exit": N}``, each run's report with its ``verdict`` — ``NO_SUCH_RUN`` for an id without
records — and ``exit``); the exit status is the worst: 1, then 2, else 0.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runplane.config import Settings
from runplane.core.repair import erased
from runplane.core.verify import bodies_of, verify_records
from runplane.journal.summary import erased_verdict
from runplane.runs.client import Client
from runplane.runs.operate import lookup
from runplane.runs.read import (
    EXIT_BODIES_MISSING,
    EXIT_BROKEN,
    journal_run_ids,
    read_run,
    verify_exit_code,
)
from runplane.runs.repair import read_snapshot
from runplane.serving.auth import DEFAULT_TENANT
from runplane.signing.admission import SigningKey
from runplane.signing.journal import PUBLIC_KEYS_ENV, SIGNING_KEY_ENV, Keyring
from runplane.wire import SessionSnapshot, Verdict, to_dict

journal_app = typer.Typer(
    help="A run's hash-chained journal: show and verify it.", no_args_is_help=True
)

# No record of the run at all (a mistyped id or key): a bad argument, as everywhere in the CLI.
EXIT_NO_SUCH_RUN = 2


def no_such_run(run: str) -> typer.Exit:
    """The one answer every command gives for a run nobody knows."""
    typer.echo(f"no such run: {run!r} (neither a run id nor an admission key)", err=True)
    return typer.Exit(EXIT_NO_SUCH_RUN)


def find_run(settings: Settings, run_or_key: str) -> tuple[str, SessionSnapshot | None]:
    """(run id, latest snapshot) for a run id or an admission key. Without a snapshot (a run
    known only by its journal) the argument is taken as the run id: its records decide. An
    admission key is claimed per tenant: it is looked up as ``RUNPLANE_TENANT``'s (default
    ``default``, what ``runplane emit`` sends as) — another tenant's run by its run id."""
    tenant = os.environ.get("RUNPLANE_TENANT", "").strip() or DEFAULT_TENANT
    with Client(settings) as client:
        snap = lookup(client, run_or_key, tenant)
    return (run_or_key, None) if snap is None else (snap.session_id, snap)


def result_of(snap: SessionSnapshot | None) -> dict[str, Any]:
    """A run's input, output and error (bodies) from its snapshot, for ``--json``."""
    if snap is None:
        return {"input": None, "output": None, "error": None}
    return {
        "input": _parsed(snap.input_json),
        "output": _parsed(snap.output_json),
        "error": None if snap.error is None else to_dict(snap.error),
    }


def result_rows(snap: SessionSnapshot | None) -> list[tuple[str, str]]:
    """The same, as (field, text) rows for a person: input, then output or error."""
    if snap is None:
        return []
    rows = [("input", snap.input_json)]
    if snap.output_json is not None:
        rows.append(("output", snap.output_json))
    if snap.error is not None:
        rows.append(("error", f"{snap.error.type}: {snap.error.message}"))
    return rows


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _ts(ms: int | None) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def _verdict_cell(v: Verdict) -> str:
    colour = {Verdict.VERIFIED: "green", Verdict.BODY_MISSING: "yellow", Verdict.BROKEN: "red"}[v]
    return f"[{colour}]{v}[/{colour}]"


@journal_app.command("show")
def journal_show(
    run_id: str = typer.Argument(..., metavar="RUN", help="run id or admission key"),
    bodies: bool = typer.Option(False, "--bodies", help="also print each call's result body"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The run's journal records as they are on the topic, with a verdict per record."""

    settings = Settings.from_env()
    asked = run_id
    run_id, snap = find_run(settings, asked)
    history = read_run(settings, run_id, bodies=True, keyring=_keyring())
    if not history.records:
        raise no_such_run(asked)
    report = verify_records(run_id, history.records, bodies_of(history.bodies), history.unsigned)
    if as_json:
        out: dict[str, Any] = {
            **result_of(snap),
            "run_id": run_id,
            "records": [
                {**to_dict(r), "verdict": str(f.verdict), "reason": f.reason}
                for r, (_, f) in zip(history.records, report.findings, strict=True)
            ],
        }
        if bodies:
            out["bodies"] = {
                f"{e}/{c}": None if v is None else to_dict(v)
                for (e, c), v in history.bodies.items()
            }
        _print_json(out)
        return
    table = Table(
        title=f"journal of {run_id} (partition {history.partition})", title_justify="left"
    )
    for col in ("seq", "era", "kind", "call", "family/name", "cost", "stamp", "hash", "verdict"):
        # small numbers must stay readable when a narrow terminal squeezes the table
        table.add_column(
            col, min_width=3 if col in ("seq", "era", "call") else None, overflow="fold"
        )
    for r, (_, f) in zip(history.records, report.findings, strict=True):
        cost = (
            ""
            if r.cost is None
            else f"{r.cost.tokens_in}+{r.cost.tokens_out} tok {r.cost.units:g}u"
        )
        table.add_row(
            str(r.seq),
            str(r.era),
            str(r.kind),
            "" if r.call_seq is None else str(r.call_seq),
            " ".join(x for x in (r.family, r.name) if x),
            cost,
            _ts(r.stamp_ms),
            r.hash[:12],
            _verdict_cell(f.verdict) + (f" {f.reason}" if f.reason else ""),
        )
    console = Console()
    console.print(table)
    for name, text in result_rows(snap):
        console.print(f"[bold]{name}[/bold]: {escape(text)}", highlight=False)
    if bodies:
        for (era, call), entry in sorted(history.bodies.items()):
            console.print(
                f"[bold]{era}/{call}[/bold]: "
                + (
                    "[dim]erased[/dim]"
                    if entry is None
                    else (entry.value_json or "")
                    if entry.ok
                    else f"error {entry.error}"
                )
            )


@journal_app.command("verify")
def journal_verify(
    run_ids: list[str] = typer.Argument(None, help="the runs; several are verified in one go"),
    as_json: bool = typer.Option(False, "--json"),
    all_runs: bool = typer.Option(False, "--all", help="every run on the journal topic"),
    since: str | None = typer.Option(
        None, "--since", help="runs that wrote a record since: ISO time or 30m / 12h / 7d ago"
    ),
) -> None:
    """Verify the run's chain from Kafka directly; exit 0 only when it verifies (1 broken,
    2 bodies missing or no such run). With several runs, ``--all`` or ``--since``:
    each verified in this one process, then a summary; the exit status is the worst."""
    if all_runs or since is not None or len(run_ids or []) != 1:
        raise typer.Exit(verify_batch(run_ids or [], all_runs, since, as_json))
    run_id = run_ids[0]
    settings = Settings.from_env()
    asked = run_id
    run_id, _ = find_run(settings, asked)
    history = read_run(settings, run_id, bodies=True, keyring=_keyring())
    if not history.records:
        # A mistyped id is not a broken chain: say there is nothing.
        raise no_such_run(asked)
    code, data = verify_exit_code(history)
    if code == EXIT_BODIES_MISSING:
        code = _erased_since(settings, run_id, data)
    if code == 0:
        erased = len(data["body_missing"])
        data["verdict"] = erased_verdict(erased) if erased else "VERIFIED"
    if as_json:
        _print_json({**data, "verdict": str(VERDICT_OF_EXIT[code])})
    elif code == 0:
        typer.echo(f"{run_id}: {data['verdict']} ({data['records']} records)")
    elif code == EXIT_BROKEN:
        typer.echo(f"{run_id}: BROKEN at seq {data['broken_at_seq']}: {data['reason']}")
    else:
        typer.echo(f"{run_id}: chain intact, bodies missing at seq {data['body_absent']}")
    raise typer.Exit(code)


# A verify exit status as the verdict every reader gives (the audit stream's symbols).
VERDICT_OF_EXIT: dict[int, Verdict] = {
    0: Verdict.VERIFIED,
    EXIT_BROKEN: Verdict.BROKEN,
    EXIT_BODIES_MISSING: Verdict.BODY_MISSING,
}
# Several runs: the worst status wins, a break before an unknown run before missing bodies.
_SEVERITY = (EXIT_BROKEN, EXIT_NO_SUCH_RUN, EXIT_BODIES_MISSING, 0)


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: an ISO 8601 time (UTC unless it says otherwise) or ``<n>s|m|h|d`` ago."""
    units = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    raw = text.strip()
    if raw[:-1].isdigit() and raw[-1:] in units:
        return now_ms - int(raw[:-1]) * units[raw[-1]]
    try:
        at = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise typer.BadParameter(
            f"--since {text!r}: give an ISO time (2026-12-01T09:00) or an age (30m, 12h, 7d)"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return int(at.timestamp() * 1000)


def verify_batch(run_ids: list[str], all_runs: bool, since: str | None, as_json: bool) -> int:
    """``journal verify`` of many runs in one process: one line (or JSON object) per run,
    then the summary. Returns the exit status (the worst of the runs')."""
    if not run_ids and not all_runs and since is None:
        raise typer.BadParameter("give a run id (or several), --all or --since")
    settings = Settings.from_env()
    keyring = _keyring()
    wanted = list(dict.fromkeys(run_ids))
    if all_runs or since is not None:
        since_ms = None if since is None else parse_since(since, int(time.time() * 1000))
        wanted += [r for r in journal_run_ids(settings, since_ms=since_ms) if r not in wanted]
    reports = [_verify_one(settings, run_id, keyring) for run_id in wanted]
    counts = {str(v): 0 for v in VERDICT_OF_EXIT.values()} | {"NO_SUCH_RUN": 0}
    for report in reports:
        counts[report["verdict"]] += 1
    codes = {report["exit"] for report in reports}
    code = next((c for c in _SEVERITY if c in codes), 0)
    if as_json:
        _print_json({"runs": reports, "summary": {"runs": len(reports), **counts}, "exit": code})
        return code
    for report in reports:
        typer.echo(f"{report['run_id']}: {_batch_line(report)}")
    typer.echo(
        f"{len(reports)} runs: {counts['VERIFIED']} verified, {counts['BROKEN']} broken, "
        f"{counts['BODY_MISSING']} with bodies missing, {counts['NO_SUCH_RUN']} without records"
    )
    return code


def _batch_line(report: dict[str, Any]) -> str:
    verdict = report["verdict"]
    if verdict == "BROKEN":
        return f"BROKEN at seq {report['broken_at_seq']}: {report['reason']}"
    if verdict == "BODY_MISSING":
        return f"BODY_MISSING at seq {report['body_absent']}"
    if verdict == "NO_SUCH_RUN":
        return "NO_SUCH_RUN (no journal records)"
    erased = f", {len(report['body_missing'])} bodies erased" if report["body_missing"] else ""
    return f"VERIFIED ({report['records']} records{erased})"


def _verify_one(settings: Settings, run_id: str, keyring: Keyring | None) -> dict[str, Any]:
    history = read_run(settings, run_id, bodies=True, keyring=keyring)
    if not history.records:
        return {"run_id": run_id, "verdict": "NO_SUCH_RUN", "exit": EXIT_NO_SUCH_RUN}
    code, data = verify_exit_code(history)
    if code == EXIT_BODIES_MISSING:
        code = _erased_since(settings, run_id, data)
    return {**data, "verdict": str(VERDICT_OF_EXIT[code]), "exit": code}


def _erased_since(settings: Settings, run_id: str, data: dict[str, Any]) -> int:
    """Bodies absent from ``results`` because the run was erased (by an operator or the
    retention) and the log cleaner has since removed the tombstones too: the run's snapshot
    still says so. Then the chain verifies with its bodies erased (exit 0)."""

    snap = read_snapshot(settings, run_id)
    if snap is None or not erased(snap) or snap.error is None:
        return EXIT_BODIES_MISSING
    data["erased"] = snap.error.message
    return 0


def _keyring() -> Keyring | None:
    # The chain writers' public keys, as the journal service reads them: with them, an
    # unsigned record is a break here too (one verdict for every reader).
    return Keyring.from_env(os.environ)


@journal_app.command("keygen")
def journal_keygen(
    key_id: str = typer.Argument(..., help="a name for the key, e.g. the date: k2026-11"),
) -> None:
    """Print a fresh Ed25519 key pair for signing the journal (docs/security.md).

    The first line goes to the chain writers (admission, executor, cases) as
    RUNPLANE_JOURNAL_SIGNING_KEY, the second to every reader's RUNPLANE_JOURNAL_PUBLIC_KEYS.
    """
    key = SigningKey.generate(key_id)
    typer.echo(f"{SIGNING_KEY_ENV}={key.to_text()}")
    typer.echo(f"{PUBLIC_KEYS_ENV}={key_id}:{key.public_b64()}")


def register(app: typer.Typer) -> None:
    """Attach ``journal`` to the root app (``runs`` is ``cli/runs.py``)."""
    app.add_typer(journal_app, name="journal")
