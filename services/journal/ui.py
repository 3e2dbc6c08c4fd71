"""The runs UI: server-rendered pages over the run API's own data, no build step.

- ``GET /ui`` — sign in with a token, or (signed in) the runs of your tenant, newest first,
  filtered by status, capability, case and start time (a plain GET form: filters are links).
- ``GET /ui/overview`` — charts over the same index (``services.journal.ui_overview``): runs
  by status over time, duration p50/p99 and cost per capability, as inline SVG.
- ``GET /ui/runs/{run_id}`` — one run: status, capability, case, era, cost, what it waits on;
  its verification verdict (the chain verified now from the topics, next to the journal
  service's own); its parent and children and other runs its records name (fork,
  successor); its case — version, obligations and (auditors) state, read from ``cases``
  (``services.journal.ui_case``); its live panel — the run's stream as it happens (text as
  the model sends it, tool calls proposed, started, finished or refused, parked, resumed,
  ended; a restarted attempt announced), read by the page's ``live.js`` from
  ``/ui/stream/{run_id}``; and its journal as a timeline — each record's kind, effect, time,
  cost, label and facts.
- ``GET /ui/stream/{run_id}`` — the run's live stream as server-sent events for the page
  (``services.journal.live``, the same answer as ``GET /runs/{id}/stream``): the browser's
  ``EventSource`` cannot send a bearer header, so this one takes the sign-in cookie, which
  lives under ``/ui`` only. ``Last-Event-ID`` resumes it as the API's does.
- ``POST /ui/signin`` · ``/ui/signout``.

Same authentication and tenancy as the API (``services.journal.api``): any configured
principal signs in with their token and sees only their tenant's runs; another tenant's run
is "not found", as an unknown id is. Bodies are never shown here (the API serves them to
auditors). Security headers, the HttpOnly cookie and the origin check are ``runplane.web``'s,
shared with the worklist page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from confluent_kafka import KafkaException
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from runplane.core.verify import bodies_of, verify_records
from runplane.errors import RunplaneError
from runplane.journal.index import RunFilter
from runplane.journal.summary import TERMINAL, RunSummary
from runplane.runs.stream import Follow
from runplane.serving.auth import Principal, PrincipalSource
from runplane.web import (
    SecurityHeaders,
    Session,
    Templates,
    e,
    mount_assets,
    page_html,
    read_form,
    signin_html,
    when,
)
from runplane.wire import CaseRecord, JournalRecord, RunStatus
from services.journal.auth import AUDITOR
from services.journal.live import stream_response
from services.journal.runs import Runs
from services.journal.ui_case import case_section, related_section
from services.journal.ui_overview import (
    OVERVIEW_LIMIT,
    CapabilityStats,
    by_capability,
    cost_chart,
    duration_chart,
    duration_text,
    status_chart,
    status_class,
    status_slots,
)

__all__ = ["install_ui", "run_href"]

HERE = Path(__file__).parent
_template = Templates(HERE / "templates")
_SESSION_COOKIES = ("runplane_runs_token", "runplane_runs_flash")
_PAGE_LIMIT = 200


def run_href(run_id: str) -> str:
    return "/ui/runs/" + quote(run_id, safe="")


def stream_href(run_id: str) -> str:
    """Where the run page's live panel reads the run's stream (under the cookie's path)."""
    return "/ui/stream/" + quote(run_id, safe="")


def _kind_class(kind: str) -> str:
    if any(word in kind for word in ("FAILED", "QUARANTINE", "REFUSED", "BROKEN")):
        return "bad"
    if any(word in kind for word in ("IN_DOUBT", "PARKED", "OPENED", "ANNOUNCED", "WARN")):
        return "wait"
    if any(word in kind for word in ("COMPLETED", "DECIDED", "RECORDED")):
        return "ok"
    return ""


def _linked_runs(records: Iterable[JournalRecord]) -> list[tuple[str, str]]:
    """(fact, run id) for every fact naming another run (``parent_run``, ``child_run``, …)."""
    seen: list[tuple[str, str]] = []
    for record in records:
        for key, value in sorted(record.attrs.items()):
            if (
                (key.endswith("_run") or key.endswith("run_id"))
                and value
                and (key, value) not in seen
            ):
                seen.append((key, value))
    return seen


def _ms_from_local(text: str) -> int | None:
    """A ``datetime-local`` field (read as UTC) in ms; None when empty or malformed."""
    try:
        stamp = dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(stamp.timestamp() * 1000)


def _local_from_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M")


class RunsPage:
    """The HTML side of the journal's run API, on the same app and port."""

    def __init__(self, runs: Runs, principals: PrincipalSource, public_origin: str | None) -> None:
        self.runs = runs
        self.principals = principals
        self.session = Session(*_SESSION_COOKIES, public_origin, path="/ui")

    def who(self, request: Request) -> Principal | None:
        return self.principals.authenticate(self.session.token(request))

    def render(
        self, title: str, body: str, who: Principal | None, status: int = 200
    ) -> HTMLResponse:
        signed = (
            f'<span class="who">Signed in as <strong>{e(who.name)}</strong> '
            f"(tenant {e(who.tenant)})</span>"
            '<form method="post" action="/ui/signout" class="inline">'
            '<button class="link">Sign out</button></form>'
            if who is not None
            else ""
        )
        page = page_html(
            title=title,
            product="runs",
            home="/ui",
            stylesheet="/ui/static/journal.css",
            who=signed,
            flash="",
            content=body,
        )
        return HTMLResponse(page, status_code=status)

    def signin(self, error: str = "", status: int = 200) -> HTMLResponse:
        body = signin_html(
            action="/ui/signin",
            lede="Paste your access token (the one the worklist and the run API take). You "
            "see your own tenant's runs.",
            error=error,
        )
        return self.render("Sign in", body, None, status)

    # --- the list ----------------------------------------------------------------------------

    def list_page(self, request: Request, who: Principal) -> HTMLResponse:
        q = request.query_params
        status_text = q.get("status", "")
        status = RunStatus(status_text) if status_text in RunStatus.__members__ else None
        capability = q.get("capability", "").strip()[:256] or None
        case = q.get("case", "").strip()[:256] or None
        since, until = _ms_from_local(q.get("since", "")), _ms_from_local(q.get("until", ""))
        found = self.runs.run_index().list(
            RunFilter(status, capability, case, since, until, _PAGE_LIMIT, tenant=who.tenant)
        )
        options = '<option value="">any</option>' + "".join(
            f'<option value="{e(s)}"{" selected" if s is status else ""}>{e(s)}</option>'
            for s in RunStatus
        )
        body = _template("runs.html").substitute(
            count=len(found),
            status_options=options,
            capability=e(capability or ""),
            case=e(case or ""),
            since=e(_local_from_ms(since)),
            until=e(_local_from_ms(until)),
            table=self._table(found),
        )
        return self.render("Runs", body, who)

    @staticmethod
    def _table(found: list[RunSummary]) -> str:
        if not found:
            return '<p class="note">No runs match.</p>'
        # Each cell names its column (data-label): below 40rem the rows become cards.
        rows = "".join(
            f'<tr class="run-{status_class(s.status)}">'
            f'<td data-label="Run">{_id_link(s.run_id)}</td>'
            f'<td data-label="Status">{_badge(s.status)}</td>'
            f'<td data-label="Capability">{e(s.capability or "—")}</td>'
            f'<td data-label="Case">{_id_text(s.case_id)}</td>'
            f'<td data-label="Started">{when(s.started_ms)}</td>'
            f'<td data-label="Updated">{when(s.updated_ms)}</td>'
            f'<td data-label="Chain">{e(s.shown_verdict)}</td>'
            "</tr>"
            for s in found
        )
        head = (
            "<tr><th>Run</th><th>Status</th><th>Capability</th><th>Case</th>"
            "<th>Started</th><th>Updated</th><th>Chain</th></tr>"
        )
        return f'<table class="runs"><thead>{head}</thead><tbody>{rows}</tbody></table>'

    # --- the overview ------------------------------------------------------------------------

    def overview_page(self, request: Request, who: Principal) -> HTMLResponse:
        q = request.query_params
        since, until = _ms_from_local(q.get("since", "")), _ms_from_local(q.get("until", ""))
        found = self.runs.run_index().list(
            RunFilter(since_ms=since, until_ms=until, limit=OVERVIEW_LIMIT, tenant=who.tenant)
        )
        stats = by_capability(found)
        window = "".join(
            f" started {word} {_local_from_ms(ms).replace('T', ' ')} UTC"
            for word, ms in (("after", since), ("before", until))
            if ms is not None
        )
        body = _template("overview.html").substitute(
            count=len(found),
            window=e(window),
            since=e(_local_from_ms(since)),
            until=e(_local_from_ms(until)),
            status_chart=status_chart(status_slots(found)),
            duration_chart=duration_chart(stats),
            cost_chart=cost_chart(stats),
            table=_stats_table(stats),
        )
        return self.render("Overview", body, who)

    # --- one run -----------------------------------------------------------------------------

    def run_page(self, who: Principal, run_id: str) -> HTMLResponse:
        try:
            summary, history = self.runs.history(run_id, who, bodies=True)
        except HTTPException as exc:
            if exc.status_code == 404:
                body = f'<p class="note">{e(exc.detail)}.</p><p><a href="/ui">All runs</a></p>'
                return self.render("Not found", body, who, 404)
            raise
        report = verify_records(
            run_id, history.records, bodies_of(history.bodies), history.unsigned
        )
        if report.verified and not report.body_missing:
            verdict, cls = "VERIFIED", "ok"
            text = f"All {report.records} records chain and every body matches its digest."
        elif report.verified and summary.erased_bodies is not None:
            verdict, cls = summary.shown_verdict, "ok"
            text = f"The chain holds; erased by {summary.erased_by}: bodies at seq "
            text += f"{list(report.body_missing)}."
        elif report.verified:
            verdict, cls = "BODY MISSING", "wait"
            text = f"The chain holds; bodies missing or erased at seq {list(report.body_missing)}."
        else:
            verdict, cls = "BROKEN", "bad"
            text = f"Broken at seq {report.broken_at_seq}: {report.reason}"
        text += f" The journal service says {summary.verdict}."
        cost = summary.cost
        case, problem = self._case(summary)
        related = related_section(history.records, _linked_runs(history.records), run_href)
        case_html = case_section(
            summary.case_id, case, show_state=AUDITOR in who.roles, href=run_href, problem=problem
        )
        body = _template("run.html").substitute(
            run_id=e(run_id),
            stream_href=e(stream_href(run_id)),
            over="true" if summary.status in TERMINAL else "false",
            status=e(summary.status or "—"),
            status_class=status_class(summary.status),
            capability=e(summary.capability or "—"),
            case=e(summary.case_id or "—"),
            era=summary.era,
            started=when(summary.started_ms),
            ended=when(summary.ended_ms),
            parked_on=_waiting_on(summary.parked_on),
            cost=e(f"{cost.tokens_in} in / {cost.tokens_out} out tokens, {cost.units:g} units"),
            verdict=e(verdict),
            verdict_class=cls,
            verdict_text=e(text),
            related=related,
            case_section=case_html,
            records=len(history.records),
            timeline="\n".join(_timeline_item(r) for r in history.records),
        )
        return self.render(f"Run {run_id}", body, who)

    def _case(self, summary: RunSummary) -> tuple[CaseRecord | None, str | None]:
        """The run's case, or why it could not be read (the page is shown either way)."""
        try:
            return self.runs.case(summary), None
        except HTTPException as exc:  # the scan limit: the run's page still comes first
            return None, f"case not read now: {exc.detail}"
        except (RunplaneError, KafkaException) as exc:
            return None, f"case not read now: {exc}"


def _waiting_on(parked_on: str | None) -> str:
    """What the run waits for; a run parked on its version says so plainly (the executor
    parked it: no deployed version of its line serves it)."""
    version = (parked_on or "").removeprefix("version:")
    if parked_on is None or version == parked_on:
        return e(parked_on or "—")
    return (
        f'<span class="badge badge-wait">version {e(version)} not deployed</span> '
        '<span class="muted">parked, not failed: it goes on when an executor hosting its '
        "version line takes it</span>"
    )


def _badge(status: RunStatus | None) -> str:
    if status is None:
        return '<span class="badge">—</span>'
    return f'<span class="badge badge-{status_class(status)}">{e(status)}</span>'


def _id_text(value: str | None) -> str:
    """An id on one line: cut with an ellipsis where the column ends, whole in its title
    (ids are long and break nowhere meaningful, so they never wrap mid-id)."""
    if value is None:
        return "—"
    return f'<code class="id" title="{e(value)}">{e(value)}</code>'


def _id_link(run_id: str) -> str:
    return f'<a class="id-link" href="{e(run_href(run_id))}">{_id_text(run_id)}</a>'


def _stats_table(stats: list[CapabilityStats]) -> str:
    if not stats:
        return '<p class="note">No runs match.</p>'

    def took(ms: int | None) -> str:
        return "—" if ms is None else e(duration_text(ms))

    rows = "".join(
        "<tr>"
        f'<td data-label="Capability">{e(s.capability)}</td>'
        f'<td data-label="Runs">{s.runs}</td><td data-label="Ended">{s.ended}</td>'
        f'<td data-label="p50">{took(s.p50_ms)}</td><td data-label="p99">{took(s.p99_ms)}</td>'
        f'<td data-label="Cost">{s.cost.units:g} units, '
        f"{s.cost.tokens_in}/{s.cost.tokens_out} tokens</td>"
        "</tr>"
        for s in stats
    )
    head = (
        "<tr><th>Capability</th><th>Runs</th><th>Ended</th><th>p50</th><th>p99</th>"
        "<th>Cost</th></tr>"
    )
    return f'<table class="runs stats"><thead>{head}</thead><tbody>{rows}</tbody></table>'


def _timeline_item(r: JournalRecord) -> str:
    kind = str(r.kind)
    effect = f" · {e(r.family)} <code>{e(r.name)}</code>" if r.family and r.name else ""
    slot = f" · era {r.era} call {r.call_seq}" if r.call_seq is not None else f" · era {r.era}"
    cost = (
        f" · cost {r.cost.tokens_in}/{r.cost.tokens_out} tokens, {r.cost.units:g} units"
        if r.cost is not None and (r.cost.tokens_in or r.cost.tokens_out or r.cost.units)
        else ""
    )
    label = f"{e(r.label.trust)}, {e(r.label.sensitivity)}" + (
        f" from {e(', '.join(r.label.provenance))}" if r.label.provenance else ""
    )
    attrs = "".join(
        f"<span><strong>{e(k)}</strong> {_attr_value(k, v)}</span>"
        for k, v in sorted(r.attrs.items())
    )
    return (
        f'<li class="kind-{_kind_class(kind)}" id="seq-{r.seq}"><div class="head">'
        f'<span class="seq">#{r.seq}</span><span class="kind">{e(kind)}</span>'
        f'<span class="meta">{when(r.stamp_ms)}{slot}{effect}{cost}</span></div>'
        f'<p class="attrs"><span><strong>label</strong> {label}</span>{attrs}</p></li>'
    )


def _attr_value(key: str, value: str) -> str:
    if key.endswith("_run") or key.endswith("run_id"):
        return f'<a href="{e(run_href(value))}"><code>{e(value)}</code></a>'
    return e(value)


def _live(page: RunsPage, runs: Runs, stream: Follow | None) -> Callable[..., Any]:
    """The run page's live stream (``/ui/stream/{run}``): an EventSource sends the sign-in
    cookie, not a bearer header."""

    async def live(request: Request) -> Response:
        # Identity from the sign-in cookie, tenancy from that principal (``stream_response``
        # looks the run up as theirs): nothing in the request names who is asking.
        who = page.who(request)
        if who is None:
            return Response("sign in first", status_code=401, media_type="text/plain")
        # The header first (EventSource's reconnect), else ?after= — read by the same rule.
        resume = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            return await stream_response(
                runs, stream, request.path_params["run_id"], who, resume, None
            )
        except HTTPException as exc:
            return Response(str(exc.detail), status_code=exc.status_code, media_type="text/plain")

    return live


def install_ui(
    app: FastAPI,
    runs: Runs,
    principals: PrincipalSource,
    *,
    public_origin: str | None = None,
    stream: Follow | None = None,
) -> None:
    """Add the runs UI's routes (hidden from the OpenAPI description), its stylesheet and the
    security headers (the page CSP on ``/ui`` only: the rest of the app is the JSON API).
    ``stream``: follows a run's live stream for the run page (None: the panel says so)."""
    page = RunsPage(runs, principals, public_origin)
    app.add_middleware(SecurityHeaders, pages=("/ui",))
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    mount_assets(app)

    async def home(request: Request) -> Response:
        who = page.who(request)
        if who is None:
            return page.signin()
        return await run_in_threadpool(page.list_page, request, who)

    async def overview(request: Request) -> Response:
        who = page.who(request)
        if who is None:
            return page.signin("Please sign in.", 401)
        return await run_in_threadpool(page.overview_page, request, who)

    async def show(request: Request) -> Response:
        who = page.who(request)
        if who is None:
            return page.signin("Please sign in.", 401)
        run_id = request.path_params["run_id"]
        return await run_in_threadpool(page.run_page, who, run_id)

    async def signin(request: Request) -> Response:
        if not page.session.same_origin(request):
            return page.signin("Cross-site sign-in refused.", 403)
        token = (await read_form(request)).get("token", "").strip()
        if page.principals.authenticate(token) is None:
            return page.signin("That token is not known here.", 401)
        return page.session.signed_in(request, token, "/ui")

    async def signout(request: Request) -> Response:
        return page.session.signed_out("/ui")

    app.add_route("/ui", home, methods=["GET"], include_in_schema=False)
    app.add_route("/ui/overview", overview, methods=["GET"], include_in_schema=False)
    app.add_route("/ui/signin", signin, methods=["POST"], include_in_schema=False)
    app.add_route("/ui/signout", signout, methods=["POST"], include_in_schema=False)
    app.add_route("/ui/runs/{run_id:path}", show, methods=["GET"], include_in_schema=False)
    app.add_route(
        "/ui/stream/{run_id:path}",
        _live(page, runs, stream),
        methods=["GET"],
        include_in_schema=False,
    )
