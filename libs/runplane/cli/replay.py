"""CLI: ``runplane journal export RUN… --out FILE`` and ``runplane replay FILE|--from-kafka``.

``journal export`` writes the runs' verifiable recordings (chain, bodies, input; see
``runplane.core.recording``) to a file; where the agent code that recorded them is importable
(``RUNPLANE_AGENT_MODULES``), the request bodies of their calls are attached too, so a later
divergence report shows both requests in full rather than the recorded one's witness.

``replay`` replays recordings against the agent code importable now and prints, per run, OK
or the first divergence (position, recorded vs new request, a diff). Exit status: 0 all OK,
1 any divergence, a broken recording or a capability no longer registered, 2 a file with no
runs or an unreadable one (no runs in flight is 0: nothing can diverge). ``--from-kafka`` reads the runs in flight (the default sample:
the runs a deploy would carry over) straight from the topics.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from runplane.cli.journal import find_run, journal_app, no_such_run
from runplane.config import Settings
from runplane.core.agents import REGISTRY, UnknownCapability, import_agent_modules
from runplane.core.engine import ReplayResult, RunReplay, attach_requests, replay_with
from runplane.core.recording import Recording, RecordingError, dump_recordings, load_recordings
from runplane.core.repair import erased
from runplane.core.verify import verify_records
from runplane.core.versions import VersionNotDeployed
from runplane.journal.export import in_flight, read_recording, read_snapshots, sample
from runplane.journal.summary import erased_verdict

EXIT_DIVERGED = 1
EXIT_USAGE = 2


def _registry(settings: Settings) -> None:
    import_agent_modules(settings.agent_modules)


def _with_requests(recording: Recording) -> Recording:
    try:  # the version that recorded it (or the newest of its line)
        spec = REGISTRY.spec_for(recording.capability, recording.snapshot.agent_version)
    except (UnknownCapability, VersionNotDeployed):
        return recording
    return attach_requests(spec, recording)


@journal_app.command("export")
def journal_export(
    run_ids: list[str] = typer.Argument(
        ..., metavar="RUN...", help="the runs to export (run ids or admission keys)"
    ),
    out: Path = typer.Option(..., "--out", help="the file to write"),
    requests: bool = typer.Option(
        True, help="attach request bodies re-issued by the agent code importable here"
    ),
) -> None:
    """Write the runs' journals (chain + bodies + input) to a file `runplane replay` reads."""

    settings = Settings.from_env()
    snapshots = read_snapshots(settings)
    # A run named by its admission key is found as every command finds it (find_run).
    run_ids = [r if r in snapshots else find_run(settings, r)[0] for r in run_ids]
    missing = [r for r in run_ids if r not in snapshots]
    if missing:
        raise no_such_run(", ".join(missing))
    if requests:
        _registry(settings)
    recordings = [read_recording(settings, snapshots[r]) for r in run_ids]
    if requests:
        recordings = [_with_requests(r) for r in recordings]
    for rec in recordings:
        for problem in rec.problems():
            typer.echo(f"{rec.session_id}: warning: {problem}", err=True)
    out.write_text(dump_recordings(recordings), encoding="utf-8")
    typer.echo(f"exported {len(recordings)} run(s) to {out}")


def replay(
    file: Path | None = typer.Argument(
        None, help="an export file, a golden journal or a folder of them"
    ),
    from_kafka: bool = typer.Option(False, "--from-kafka", help="replay the runs in flight"),
    capability: str | None = typer.Option(None, help="only runs of this capability"),
    sample: int | None = typer.Option(None, min=1, help="at most N runs (a stable sample)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output (for CI)"),
) -> None:
    """Replay recorded runs against the agent code importable now; exit 1 on any divergence."""
    if (file is None) == (not from_kafka):
        typer.echo("give a FILE or --from-kafka (one of them)", err=True)
        raise typer.Exit(EXIT_USAGE)
    settings = Settings.from_env()
    _registry(settings)
    erased_runs: list[str] = []
    if file is None:
        reports = _from_kafka(settings, capability, sample)
    else:
        recordings = [r for r in _from_file(file) if capability in (None, r.capability)]
        reports = []
        for r in _sampled(recordings, sample):
            # An erased run has no bodies left to replay with: not broken, and it says so.
            line = _erased_line(r)
            if line is None:
                reports.append(replay_with(REGISTRY, r))
            else:
                erased_runs.append(line)
    _print(reports, as_json, erased_runs)
    if not reports and not erased_runs and file is not None:
        raise typer.Exit(EXIT_USAGE)  # an empty file is a mistake; no runs in flight is not
    if not all(r.ok for r in reports):
        raise typer.Exit(EXIT_DIVERGED)


def _erased_line(recording: Recording) -> str | None:
    """An erased run's verdict, the one ``journal verify`` and ``runs show`` give it; None
    for a run that was not erased, or whose chain does not verify (replaying reports it)."""
    if not erased(recording.snapshot):
        return None
    report = verify_records(recording.session_id, recording.journal, dict(recording.results))
    if not report.verified:
        return None
    verdict = erased_verdict(len(report.body_missing))
    return f"{recording.session_id}: {verdict}: not replayed (its bodies are gone)"


def _from_file(file: Path) -> list[Recording]:
    files = sorted(file.glob("*.json")) if file.is_dir() else [file]
    try:
        return [r for f in files for r in load_recordings(f.read_text(encoding="utf-8"))]
    except (OSError, RecordingError) as exc:
        typer.echo(f"{file}: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc


def _sampled(recordings: list[Recording], n: int | None) -> list[Recording]:

    by_id = {r.session_id: r for r in recordings}
    return [by_id[i] for i in sample(by_id, n)]


def _from_kafka(settings: Settings, capability: str | None, n: int | None) -> list[RunReplay]:
    """Replay the (sampled) runs in flight; a run that cannot be read whole is BROKEN."""

    running = {s.session_id: s for s in in_flight(read_snapshots(settings), capability)}
    reports = []
    for run_id in sample(running, n):
        snap = running[run_id]
        try:
            recording = read_recording(settings, snap)
        except RecordingError as exc:
            reports.append(RunReplay(run_id, snap.capability, ReplayResult.BROKEN, detail=str(exc)))
            continue
        reports.append(replay_with(REGISTRY, recording))
    return reports


def _print(reports: list[RunReplay], as_json: bool, erased_runs: list[str]) -> None:
    if as_json:
        summary = {
            "runs": len(reports),
            "ok": sum(r.ok for r in reports),
            "diverged": sum(not r.ok for r in reports),
            "reports": [r.to_json() for r in reports],
            "erased": erased_runs,
        }
        typer.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    for r in reports:
        typer.echo(r.explain())
    for line in erased_runs:
        typer.echo(line)
    bad = sum(not r.ok for r in reports)
    typer.echo(
        f"{len(reports)} run(s) replayed: {len(reports) - bad} ok, {bad} not ok"
        + (f"; {len(erased_runs)} erased, not replayed" if erased_runs else "")
    )


def register(app: typer.Typer) -> None:
    """Attach ``runplane replay`` to the root app (``journal export`` rides on ``journal``)."""
    app.command("replay")(replay)
