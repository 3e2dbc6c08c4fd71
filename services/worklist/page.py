"""The worklist's web page: server-rendered HTML forms, a little JavaScript, no framework.

- ``GET /`` — sign in with a token, or (signed in) the tasks waiting for you, the other open
  tasks (with why you may not act on them) and recently finished ones.
- ``GET /tasks/{task_id}`` — the question, the run's proposed answer (pretty JSON), who has
  approved so far, and the actions you may take: claim, release, approve or reject with a
  comment. An operator task (a call whose outcome is in doubt) shows the call's name and
  arguments instead, and three answers: it happened (with the observed result as JSON), it
  did not happen (perform it again), or give up (record it failed).
- ``GET /tasks/{task_id}/live`` — while the task is open, the calls its run proposes as they
  arrive (the run's live stream, ``runplane.runs.stream``, kept to ``TOOL_CALL_PROPOSED`` and
  ``ENDED``, from the task's opening on), as server-sent events for ``worklist.js``; only to
  a person who may see the task (404 otherwise, as for the page).
- ``POST /signin`` · ``/signout`` · ``/tasks/{task_id}/claim|release|decide`` — form posts,
  answered with a redirect (post/redirect/get) and a one-time message.

The token lives in an HttpOnly, SameSite=Strict cookie, so page scripts cannot read it and
other sites cannot post with it; every POST also checks ``Origin`` when the browser sends it.
Behind a TLS-terminating ingress the request the app sees is plain HTTP on an inner host, so
the deployment names the address people use (``RUNPLANE_WORKLIST_PUBLIC_ORIGIN``, e.g.
``https://worklist.example.com``): ``Origin`` is compared with it, and the cookie is
``Secure`` whenever it is https. Without it, the request's own scheme and host are used.

Every response carries ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``
and a CSP forbidding framing (clickjacking a Decide button); the page's own responses get a
strict CSP besides (scripts, styles, forms and everything else from this origin only — the
page has no inline script or style).
Identity comes from that cookie exactly as the API's comes from the bearer header: the forms
carry no actor field. Every value is HTML-escaped where it is placed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import redis
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from runplane.errors import RetryableError
from runplane.runs.stream import (
    KEEP_ALIVE_S,
    SSE_HEADERS,
    BadEventId,
    Follow,
    StreamItem,
    last_event_id,
    sse_body,
)
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
from runplane.wire import DecisionOutcome, StreamKind, TaskKind, TaskRecord, TaskStatus
from services.worklist.access import ACTIVE, visible_to
from services.worklist.actions import ActionError, Choice, Filter, Worklist, result_comment
from services.worklist.answers import OperatorCall, answer_value, operator_call, parse_json
from services.worklist.api import pretty

__all__ = ["install_page", "task_href"]

HERE = Path(__file__).parent
TOKEN_COOKIE = "runplane_worklist_token"
FLASH_COOKIE = "runplane_worklist_flash"

_template = Templates(HERE / "templates")


def task_href(task_id: str, action: str = "") -> str:
    return "/tasks/" + quote(task_id, safe="") + (f"/{action}" if action else "")


class Page:
    """The HTML side of the worklist, on the same app and port as the API."""

    def __init__(
        self,
        worklist: Worklist,
        principals: PrincipalSource,
        public_origin: str | None = None,
        runs_ui: str | None = None,
        stream: Follow | None = None,
    ) -> None:
        self.runs_ui = runs_ui
        self.stream = stream
        self.worklist = worklist
        self.principals = principals
        self.session = Session(TOKEN_COOKIE, FLASH_COOKIE, public_origin)

    # --- plumbing ----------------------------------------------------------------------------

    def who(self, request: Request) -> Principal | None:
        return self.principals.authenticate(self.session.token(request))

    def render(
        self, request: Request, title: str, body: str, who: Principal | None, status: int = 200
    ) -> HTMLResponse:
        flash = self.session.flash(request)
        flash_html = (
            f'<p class="flash flash-{flash[0]}" role="status">{e(flash[1])}</p>' if flash else ""
        )
        signed = (
            f'<span class="who">Signed in as <strong>{e(who.name)}</strong> '
            f"({e(', '.join(sorted(who.roles)) or 'no roles')})</span>"
            '<form method="post" action="/signout" class="inline">'
            '<button class="link">Sign out</button></form>'
            if who is not None
            else ""
        )
        page = page_html(
            title=title,
            product="worklist",
            home="/",
            stylesheet="/static/worklist.css",
            who=signed,
            flash=flash_html,
            content=body,
            script='<script src="/static/worklist.js" defer></script>',
        )
        response = HTMLResponse(page, status_code=status)
        if flash:
            self.session.consumed(response)
        return response

    def back(self, to: str, kind: str, text: str) -> RedirectResponse:
        return self.session.back(to, kind, text)

    def same_origin(self, request: Request) -> bool:
        return self.session.same_origin(request)

    @staticmethod
    async def form(request: Request) -> dict[str, str]:
        return await read_form(request)

    # --- pages -------------------------------------------------------------------------------

    def signin(self, request: Request, error: str = "", status: int = 200) -> HTMLResponse:
        body = signin_html(
            action="/signin",
            lede="Paste the access token your administrator gave you. It identifies you on "
            "every action.",
            error=error,
        )
        return self.render(request, "Sign in", body, None, status)

    def home(self, request: Request, who: Principal) -> HTMLResponse:
        now = self.worklist.now_ms()
        # Two index walks, each bounded: what is open (oldest first) and the latest 20 done.
        tasks = self.worklist.list(who, Filter(limit=500, active=True))
        mine = [t for t in tasks if self.worklist.why_not(who, t, now) is None]
        others = [t for t in tasks if t not in mine]
        done = self.worklist.list(who, Filter(limit=20, active=False))
        body = _template("home.html").substitute(
            mine=self._table(mine, who, "Nothing is waiting for you.", reasons=False),
            others=self._table(others, who, "No other open tasks.", reasons=True),
            done=self._table(done, who, "Nothing decided yet.", reasons=False),
            mine_count=len(mine),
        )
        return self.render(request, "Tasks", body, who)

    def _table(self, tasks: list[TaskRecord], who: Principal, empty: str, *, reasons: bool) -> str:
        if not tasks:
            return f'<p class="empty">{e(empty)}</p>'
        rows = []
        for t in tasks:
            why = self.worklist.why_not(who, t) if reasons else None
            approvals = f"{len(t.approved_by)} of {t.task.approvals}"
            rows.append(
                "<tr>"
                f'<td><a href="{e(task_href(t.task.task_id))}">{e(t.task.question)}</a>'
                + (f'<div class="why">{e(why)}</div>' if why else "")
                + "</td>"
                f"<td>{_badge(t)}</td>"
                f"<td>{e(t.task.capability)}</td>"
                f"<td>{e(t.task.role)}</td>"
                f"<td>{e(t.task.case_id or '—')}</td>"
                f"<td>{approvals}</td>"
                f"<td>{when(t.task.opened_ms)}</td>"
                f"<td>{when(t.task.expires_ms)}</td>"
                "</tr>"
            )
        return _template("table.html").substitute(rows="\n".join(rows))

    def task(self, request: Request, who: Principal, task: TaskRecord) -> HTMLResponse:
        t = task.task
        why = self.worklist.why_not(who, task)
        call = operator_call(task)
        body = _template("task.html").substitute(
            question=e(t.question),
            badge=_badge(task),
            answer_title="The call in doubt" if call is not None else "The run's proposed answer",
            answer=_call_html(call)
            if call is not None
            else f'<pre class="answer" id="answer">{e(pretty(answer_value(task)))}</pre>',
            details=self._details(task),
            actions=self._actions(task, who, why),
            live=self._live(task),
        )
        return self.render(request, t.question, body, who)

    def _live(self, task: TaskRecord) -> str:
        """The panel ``worklist.js`` fills with the calls the run proposes while the task is
        open (hidden until one arrives; absent without streaming or once decided)."""
        if self.stream is None or task.status not in ACTIVE:
            return ""
        href = e(task_href(task.task.task_id, "live"))
        return (
            f'<section class="live-calls" id="live-calls" data-stream="{href}" hidden>'
            "<h2>Calls the run proposes, as they arrive</h2>"
            '<ol id="live-calls-list"></ol></section>'
        )

    def _run_link(self, session_id: str) -> str:
        code = f"<code>{e(session_id)}</code>"
        if self.runs_ui is None:
            return code
        href = f"{self.runs_ui}/ui/runs/{quote(session_id, safe='')}"
        return f'<a href="{e(href)}" class="run-link">{code}</a>'

    def _details(self, task: TaskRecord) -> str:
        t = task.task
        approvals = ", ".join(task.approved_by) or "nobody yet"
        expiry = (
            "never"
            if t.expires_ms is None
            else f"{when(t.expires_ms)} — then {e(_expiry_text(task))}"
        )
        rows: list[tuple[str, str]] = [
            ("Task", f"<code>{e(t.task_id)}</code> ({e(t.kind)})"),
            ("Run", f"{self._run_link(t.session_id)} · {e(t.capability)} · era {t.era}"),
            ("Case", e(t.case_id or "—")),
            ("Started by", e(t.initiator)),
            ("Decided by role", e(t.role)),
            ("Approvals", f"{len(task.approved_by)} of {t.approvals} ({e(approvals)})"),
            (
                "Decided by" if task.status is TaskStatus.DECIDED else "Claimed by",
                e(task.claimed_by or "nobody"),
            ),
            ("Opened", when(t.opened_ms)),
            ("Expires", expiry),
        ]
        if task.outcome is not None:
            rows.append(("Outcome", e(task.outcome)))
        if task.comment:
            rows.append(("Comment", f'<span class="pre">{e(task.comment)}</span>'))
        if task.claim_note:
            rows.append(("Claim taken back", e(task.claim_note)))
        return "\n".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)

    @staticmethod
    def _actions(task: TaskRecord, who: Principal, why: str | None) -> str:
        t = task.task
        if task.status not in ACTIVE:
            return (
                f'<p class="note">This task is {e(task.status).lower()}'
                + (f" ({e(_outcome_text(task))})" if task.outcome else "")
                + f"; the decision went to run <code>{e(t.session_id)}</code>.</p>"
                if task.status is not TaskStatus.CLOSED
                else f'<p class="note">Closed: {e(task.comment or "the run ended")}.</p>'
            )
        if why is not None:
            return f'<p class="note note-warn">You cannot act on this task: {e(why)}.</p>'
        held = task.claimed_by == who.name
        claim = (
            f'<form method="post" action="{e(task_href(t.task_id, "release"))}" class="inline">'
            '<button class="secondary">Release my claim</button></form>'
            if held
            else f'<form method="post" action="{e(task_href(t.task_id, "claim"))}" class="inline">'
            '<button class="secondary">Claim</button></form>'
            ' <span class="hint">Claiming keeps others from deciding while you look.</span>'
        )
        remaining = t.approvals - len(task.approved_by)
        note = (
            f'<p class="hint">Needs {remaining} more approval{"s" if remaining != 1 else ""} '
            "from different people.</p>"
            if t.approvals > 1
            else ""
        )
        form = "operator.html" if t.kind is TaskKind.OPERATOR else "decide.html"
        return _template(form).substitute(
            claim=claim, note=note, action=e(task_href(t.task_id, "decide"))
        )


def _call_html(call: OperatorCall) -> str:
    rows = [
        ("Call", f'<code id="call-name">{e(call.name)}</code>'),
        ("Arguments", f'<pre class="answer" id="answer">{e(pretty(call.args))}</pre>'),
    ]
    if call.idempotency_key is not None:
        rows.append(("Idempotency key", f"<code>{e(call.idempotency_key)}</code>"))
    items = "\n".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<dl class="details call">{items}</dl>'


def _decision_from_form(form: dict[str, str]) -> tuple[Choice, str]:
    """The choice and wire comment a decide form asks for; ActionError(422) when unusable."""
    try:
        choice = Choice(form.get("decision", ""))
    except ValueError:
        raise ActionError(422, "Choose one of the answers.") from None
    comment = form.get("comment", "")[:4000]
    if choice is not Choice.HAPPENED:
        return choice, comment
    if comment.strip():
        raise ActionError(
            422, "A call that happened records its observed result; leave the note empty."
        )
    raw = form.get("result", "").strip()
    try:
        # parse_json refuses deep nesting up front; RecursionError is the belt to those braces
        # (a 500 otherwise: the form allows 64 KiB of brackets).
        return choice, result_comment(parse_json(raw)) if raw else ""
    except (ValueError, RecursionError) as exc:
        raise ActionError(422, f"The observed result must be JSON: {exc}") from None


def _expiry_text(task: TaskRecord) -> str:
    t = task.task
    if str(t.on_expiry) == "PROCEED":
        return "proceeds unattended" if t.allow_unattended else "fails (unattended not allowed)"
    if str(t.on_expiry) == "ESCALATE":
        return f"escalates to {t.escalate_to or 'the escalation role'}"
    return "fails"


def _outcome_text(task: TaskRecord) -> str:
    # An operator's APPROVED means "it happened": say that, not "approved".
    if task.task.kind is TaskKind.OPERATOR and task.outcome is DecisionOutcome.APPROVED:
        return "happened"
    return str(task.outcome).lower().replace("_", " ")


def _badge(task: TaskRecord) -> str:
    label = str(task.status).lower()
    if task.status is TaskStatus.CLAIMED and task.claimed_by:
        label = f"claimed by {task.claimed_by}"
    elif task.outcome is not None and task.status is not TaskStatus.OPEN:
        label = _outcome_text(task)
    return f'<span class="badge badge-{e(str(task.status).lower())}">{e(label)}</span>'


Action = Callable[[Request, Principal, dict[str, str]], Response]


def _proposed_or_ended(item: StreamItem) -> bool:
    """What the task page shows live: a call proposed, and the run's end (the page stops)."""
    return item.event.kind in (StreamKind.TOOL_CALL_PROPOSED, StreamKind.ENDED)


def install_page(
    app: FastAPI,
    worklist: Worklist,
    principals: PrincipalSource,
    *,
    public_origin: str | None = None,
    runs_ui: str | None = None,
    stream: Follow | None = None,
) -> None:
    """Add the page's routes (hidden from the OpenAPI description), its static files and the
    security headers. ``public_origin``: the address people reach the page at (normalised
    ``scheme://host[:port]``; see the module docstring), or None. ``stream``: follows a run's
    live stream (the task page's proposed calls; None: the page shows none live)."""
    routes = _Routes(Page(worklist, principals, public_origin, runs_ui, stream))
    app.add_middleware(SecurityHeaders)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    mount_assets(app)
    app.add_route("/", routes.home, methods=["GET"], include_in_schema=False)
    app.add_route("/signin", routes.signin, methods=["POST"], include_in_schema=False)
    app.add_route("/signout", routes.signout, methods=["POST"], include_in_schema=False)
    # ".../live" and the POST routes before the GET: neither is taken for a task id.
    app.add_route(
        "/tasks/{task_id:path}/live", routes.live, methods=["GET"], include_in_schema=False
    )
    actions: tuple[tuple[str, str, Action], ...] = (
        ("/tasks/{task_id:path}/claim", "POST", routes.claim),
        ("/tasks/{task_id:path}/release", "POST", routes.release),
        ("/tasks/{task_id:path}/decide", "POST", routes.decide),
        ("/tasks/{task_id:path}", "GET", routes.show),
    )
    for path, method, fn in actions:
        app.add_route(path, routes.guarded(method, fn), methods=[method], include_in_schema=False)


class _Routes:
    """The page's endpoints. Task actions are plain functions run by :meth:`guarded`, which
    signs the person in, refuses cross-site posts and turns refusals into pages."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.worklist = page.worklist

    def guarded(self, method: str, fn: Action) -> Callable[[Request], Awaitable[Response]]:
        page = self.page

        async def handler(request: Request) -> Response:
            who = page.who(request)
            if who is None:
                return page.signin(request, "Please sign in.", 401)
            if method == "POST" and not page.same_origin(request):
                body = '<p class="note">Cross-site request refused.</p>'
                return page.render(request, "Refused", body, who, 403)
            form = await page.form(request) if method == "POST" else {}
            try:
                # Kafka and Redis calls block: off the event loop, like FastAPI's sync routes.
                result: Response = await run_in_threadpool(fn, request, who, form)
            except ActionError as exc:
                return page.back(task_href(request.path_params["task_id"]), "error", exc.message)
            except (RetryableError, redis.RedisError) as exc:
                body = f'<p class="note note-warn">{e(exc)} — try again in a moment.</p>'
                return page.render(request, "Try again", body, who, 503)
            return result

        return handler

    async def home(self, request: Request) -> Response:
        page = self.page
        who = page.who(request)
        if who is None:
            return page.signin(request)
        try:
            return await run_in_threadpool(page.home, request, who)
        except redis.RedisError as exc:
            body = f'<p class="note note-warn">The task list is unavailable: {e(exc)}.</p>'
            return page.render(request, "Try again", body, who, 503)

    async def signin(self, request: Request) -> Response:
        page = self.page
        if not page.same_origin(request):
            return page.signin(request, "Cross-site sign-in refused.", 403)
        token = (await page.form(request)).get("token", "").strip()
        if page.principals.authenticate(token) is None:
            return page.signin(request, "That token is not known here.", 401)
        return page.session.signed_in(request, token, "/")

    async def signout(self, request: Request) -> Response:
        return self.page.session.signed_out("/")

    async def live(self, request: Request) -> Response:
        """The calls the task's run proposes, as server-sent events (see the module doc)."""
        page = self.page
        who = page.who(request)  # identity from the sign-in cookie, never the request
        if who is None:
            return Response("sign in first", status_code=401, media_type="text/plain")
        task_id = request.path_params["task_id"]
        try:
            resume = last_event_id(request.headers.get("last-event-id"))
            task = await run_in_threadpool(self.worklist.show, who, task_id)
        except BadEventId as exc:
            return Response(str(exc), status_code=400, media_type="text/plain")
        except ActionError as exc:
            return Response(exc.message, status_code=exc.status, media_type="text/plain")
        except (RetryableError, redis.RedisError) as exc:
            return Response(f"try again: {exc}", status_code=503, media_type="text/plain")
        if page.stream is None:
            return Response("streaming is not configured", status_code=503)
        run_id = task.task.session_id
        events = page.stream(
            run_id,
            after=resume,
            since_ms=None if resume is not None else task.task.opened_ms,
            to_end=task.status not in ACTIVE,
            idle_s=KEEP_ALIVE_S,
        )
        return StreamingResponse(
            sse_body(events, run_id, keep=_proposed_or_ended),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )

    def show(self, request: Request, who: Principal, _: dict[str, str]) -> Response:
        try:
            task = self.worklist.show(who, request.path_params["task_id"])
        except ActionError as exc:
            body = f'<p class="note">{e(exc.message)}.</p>'
            return self.page.render(request, "Not found", body, who, 404)
        return self.page.task(request, who, task)

    def claim(self, request: Request, who: Principal, _: dict[str, str]) -> Response:
        task_id = request.path_params["task_id"]
        self.worklist.claim(who, task_id)
        return self.page.back(task_href(task_id), "ok", "You hold the claim on this task.")

    def release(self, request: Request, who: Principal, _: dict[str, str]) -> Response:
        task_id = request.path_params["task_id"]
        task = self.worklist.release(who, task_id)
        if not visible_to(task, who.name, self.worklist.policy):
            # A supervisor who released someone else's claim may not see the task once it is
            # open again (it is not their role's): back to the list, not to a 404.
            return self.page.back("/", "ok", f"Claim released: {task.claim_note or task_id}.")
        return self.page.back(task_href(task_id), "ok", "Claim released.")

    def decide(self, request: Request, who: Principal, form: dict[str, str]) -> Response:
        task_id = request.path_params["task_id"]
        choice, comment = _decision_from_form(form)
        task = self.worklist.decide(who, task_id, choice, comment)
        if task.status is TaskStatus.DECIDED:
            said = choice if choice.verdict is not None else str(task.outcome).lower()
            text = f"Decided: {said}. The run has been told and resumes."
        else:
            text = "Approved. It still needs another person's approval."
        return self.page.back(task_href(task_id), "ok", text)
