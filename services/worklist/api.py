"""The worklist's HTTP API (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

Every endpoint needs ``Authorization: Bearer <token>``; the token names the principal (name,
roles) from the deployment's principals file. Bodies carry no actor: who acts is who
authenticated.

- ``GET /api/me`` — who the token belongs to.
- ``GET /api/tasks`` — the tasks you may see (you hold their role or the role they escalate
  to, or you started, claimed or decided them; a supervisor also sees every claimed task),
  oldest open first, then finished ones newest first; filters ``status``, ``role``, ``case``,
  ``actionable`` (only what you may act on now); a page of ``limit`` tasks, and ``cursor``
  for the next page (pass it back as ``cursor``; null when nothing follows).
- ``GET /api/tasks/{task_id}`` — one task, with the run's proposed answer.
- ``POST /api/tasks/{task_id}/claim`` · ``/release`` · ``/decide`` — answered once the single
  writer has applied (or refused) the command; the body is the task as the writer left it.
  A claim is a lease (``claim_expires_ms``): past it the worklist hands the task back. A
  principal with the supervisor role may release anyone's claim; the task's ``claim_note``
  records who took it back from whom (or that the lease lapsed).
  An approval takes ``{"decision": "approve"|"reject", "comment": "…"}``. A proposed tool call
  (a task with ``editable`` arguments; its ``answer`` is the call: tool, arguments, each
  argument's label, the turn that proposed it) also takes ``{"decision": "edit", "arguments":
  {<name>: <new value>, …}, "comment": "…"}``: approved with those arguments changed — only
  ones the task lists, any JSON value — which the run records as your release of them. An operator task
  (a call whose outcome is in doubt) takes ``{"decision": "retry"|"abandon", "comment": "…"}``
  or ``{"decision": "happened", "result": <the observed result, any JSON>}``.

Statuses: 401 missing/unknown token, 403 wrong role or a four-eyes violation (with the
reason), 404 unknown task or one you may not see, 409 a conflict (claimed by someone else,
already decided, expired), 422 a malformed request or a decision the task's kind does not take,
503 when Kafka or Redis does not answer in time.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator, model_validator

from runplane.errors import RetryableError
from runplane.serving.apidocs import api_app
from runplane.serving.auth import Principal, PrincipalSource, require_principal
from runplane.serving.shell import install_backend_errors
from runplane.wire import TaskRecord, TaskStatus
from services.worklist.actions import (
    ActionError,
    Choice,
    Filter,
    Worklist,
    choices_for,
    result_comment,
)
from services.worklist.answers import MAX_JSON_DEPTH, answer_value, json_too_deep, operator_call
from services.worklist.decide import claim_lapses_ms

__all__ = ["TaskOut", "build_api", "task_out"]

# Task ids are `<session>/<era>/<call_seq>` (slashes included), so the path segment is a
# path converter; the pattern keeps control characters out of ids, logs and HTML.
TaskId = Annotated[
    str, Path(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$", description="task id")
]
Text = Annotated[str, Query(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
# A 'happened' verdict's observed result travels as the decision's comment (compact JSON).
_MAX_RESULT = 16_000


class CallOut(BaseModel):
    name: str = Field(description="The effect, e.g. tool://billing/charge")
    args: Any = Field(description="Its arguments")
    idempotency_key: str | None = Field(description="The key the called system knows it by")


class TaskOut(BaseModel):
    task_id: str
    session_id: str
    era: int
    call_seq: int | None
    kind: str = Field(description="APPROVAL or OPERATOR")
    question: str
    answer: Any = Field(description="The run's proposed answer (parsed JSON, or the raw text)")
    case_id: str | None
    capability: str
    role: str = Field(description="The role that must decide")
    approvals: int = Field(description="Distinct approvals needed")
    approved_by: list[str]
    initiator: str
    status: str = Field(description="OPEN, CLAIMED, DECIDED, EXPIRED or CLOSED")
    claimed_by: str | None = Field(
        description="Holder of the claim; on a decided task, who decided"
    )
    claim_expires_ms: int | None = Field(
        None, description="When the claim's lease ends and the task is handed back"
    )
    claim_note: str | None = Field(
        None, description="How the last claim was taken back without a decision, if one was"
    )
    outcome: str | None
    comment: str
    expires_ms: int | None
    on_expiry: str
    allow_unattended: bool
    escalate_to: str | None
    opened_ms: int
    updated_ms: int
    call: CallOut | None = Field(
        None, description="Operator tasks: the call whose outcome is in doubt"
    )
    editable: list[str] = Field(
        default_factory=list,
        description="A proposed call: the arguments an 'edit' decision may change",
    )
    choices: list[str] = Field(
        description="The decisions this task takes: approve/reject, or retry/happened/abandon"
    )
    you_may_act: bool = Field(description="Whether the caller may claim/decide it now")
    why_not: str | None = Field(None, description="Why the caller may not act, when not")


class TaskList(BaseModel):
    tasks: list[TaskOut]
    cursor: str | None = Field(
        None, description="Pass back as ``cursor`` for the next page; null when nothing follows"
    )


class Me(BaseModel):
    name: str
    roles: list[str]
    tenant: str = Field(description="The tenant whose tasks you see and decide")


def _bounded_json(value: Any, what: str) -> None:
    """``value`` must be JSON the wire can carry: not too deep, encodable, not too long."""
    if json_too_deep(value):
        raise ValueError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        text = result_comment(value)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise ValueError(f"{what} must be JSON text: {exc}") from exc
    if len(text) > _MAX_RESULT:
        raise ValueError(f"{what} is longer than {_MAX_RESULT} characters as JSON")


class DecideIn(BaseModel):
    decision: Literal["approve", "reject", "edit", "retry", "abandon", "happened"] = Field(
        description="approve/reject an approval (edit: approve a proposed call with arguments "
        "changed); retry (it did not happen, perform it again), abandon (record it failed) or "
        "happened (with result) for an operator task"
    )
    comment: str = Field("", max_length=4000)
    result: Any = Field(
        None, description="For 'happened' only: the call's observed result (any JSON)"
    )
    arguments: dict[str, Any] | None = Field(
        None, description="For 'edit' only: argument name → the value to call with (any JSON)"
    )

    @field_validator("comment")
    @classmethod
    def _encodable(cls, v: str) -> str:
        # JSON can spell lone surrogates ("\\ud800"); they cannot go on the wire as UTF-8.
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError("comment must be valid Unicode text") from exc
        return v

    @model_validator(mode="after")
    def _arguments_only_with_an_edit(self) -> DecideIn:
        if (self.decision == "edit") != (self.arguments is not None):
            raise ValueError("arguments are given with the decision 'edit', and only then")
        if self.arguments is None:
            return self
        if not self.arguments:
            raise ValueError("an edit changes at least one argument")
        _bounded_json(self.arguments, "arguments")
        return self

    @model_validator(mode="after")
    def _result_only_when_it_happened(self) -> DecideIn:
        if self.decision != "happened":
            if self.result is not None:
                raise ValueError("result is given only with the decision 'happened'")
            return self
        if self.comment:
            # The wire has one comment, and for 'happened' it is the result.
            raise ValueError("a 'happened' verdict records the observed result, not a comment")
        _bounded_json(self.result, "result")
        return self

    def wire_comment(self) -> str:
        return result_comment(self.result) if self.decision == "happened" else self.comment


class Problem(BaseModel):
    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "missing or unknown token"},
    403: {"model": Problem, "description": "wrong role or four-eyes violation"},
    404: {"model": Problem, "description": "unknown task"},
    409: {"model": Problem, "description": "conflict: claimed by someone else, decided, expired"},
    503: {"model": Problem, "description": "Kafka or Redis did not answer in time"},
}


def task_out(task: TaskRecord, worklist: Worklist, who: Principal) -> TaskOut:
    t = task.task
    why = worklist.why_not(who, task)
    call = operator_call(task)
    return TaskOut(
        task_id=t.task_id,
        session_id=t.session_id,
        era=t.era,
        call_seq=t.call_seq,
        kind=str(t.kind),
        question=t.question,
        answer=answer_value(task),
        case_id=t.case_id,
        capability=t.capability,
        role=t.role,
        approvals=t.approvals,
        approved_by=list(task.approved_by),
        initiator=t.initiator,
        status=str(task.status),
        claimed_by=task.claimed_by,
        claim_expires_ms=claim_lapses_ms(task, worklist.policy),
        claim_note=task.claim_note,
        outcome=None if task.outcome is None else str(task.outcome),
        comment=task.comment,
        expires_ms=t.expires_ms,
        on_expiry=str(t.on_expiry),
        allow_unattended=t.allow_unattended,
        escalate_to=t.escalate_to,
        opened_ms=t.opened_ms,
        updated_ms=task.updated_ms,
        call=None if call is None else CallOut(**dataclasses.asdict(call)),
        editable=list(t.editable),
        choices=[str(c) for c in choices_for(task)],
        you_may_act=why is None,
        why_not=why,
    )


class AsciiJSON(JSONResponse):
    """JSON escaped to ASCII: a lone surrogate echoed back in a 422 cannot break encoding."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, default=str).encode()


def install_error_handlers(app: FastAPI) -> None:
    """Backends that do not answer are 503 with the reason (never a 500)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return AsciiJSON({"detail": jsonable_encoder(exc.errors())}, status_code=422)

    install_backend_errors(app, redis_holds="task read model", response=AsciiJSON)

    @app.exception_handler(RetryableError)
    async def _retry(_: Request, exc: RetryableError) -> JSONResponse:
        return AsciiJSON({"detail": f"{exc}; try again"}, status_code=503)

    @app.exception_handler(ActionError)
    async def _refused(_: Request, exc: ActionError) -> JSONResponse:
        return AsciiJSON({"detail": exc.message}, status_code=exc.status)


def principal(request: Request, authorization: Annotated[str | None, Header()] = None) -> Principal:
    """The caller, from the bearer token and nothing else (401 without a known token)."""
    principals: PrincipalSource = request.app.state.principals
    return require_principal(principals, authorization)


Who = Annotated[Principal, Depends(principal)]


def build_api(worklist: Worklist, principals: PrincipalSource) -> FastAPI:
    app = api_app(
        title="runplane worklist", description=__doc__ or "", default_response_class=AsciiJSON
    )
    app.state.principals = principals
    install_error_handlers(app)

    @app.get("/api/me", response_model=Me, responses=_ERRORS, summary="Who the token belongs to")
    def me(who: Who) -> Me:
        return Me(name=who.name, roles=sorted(who.roles), tenant=who.tenant)

    @app.get("/api/tasks", response_model=TaskList, responses=_ERRORS, summary="List tasks")
    def list_tasks(
        who: Who,
        status: TaskStatus | None = None,
        role: Text | None = None,
        case: Text | None = None,
        actionable: bool = Query(False, description="only tasks you may act on now"),
        limit: int = Query(200, ge=1, le=1000),
        cursor: str | None = Query(None, max_length=2048, description="the previous page's cursor"),
    ) -> TaskList:
        f = Filter(status, role, case, actionable, limit, cursor)
        try:
            page = worklist.page(who, f)
        except ValueError as exc:
            raise ActionError(422, f"cursor: {exc}") from None
        return TaskList(tasks=[task_out(t, worklist, who) for t in page.tasks], cursor=page.cursor)

    # The POST routes come first: a GET for ".../claim" must fall through to the show route.
    @app.post("/api/tasks/{task_id:path}/claim", response_model=TaskOut, responses=_ERRORS)
    def claim(task_id: TaskId, who: Who) -> TaskOut:
        """Claim the task: nobody else can decide it until you decide or release it."""
        return task_out(worklist.claim(who, task_id), worklist, who)

    @app.post("/api/tasks/{task_id:path}/release", response_model=TaskOut, responses=_ERRORS)
    def release(task_id: TaskId, who: Who) -> TaskOut:
        """Give your claim back; a supervisor may release anyone's claim (recorded on the
        task as ``claim_note``)."""
        return task_out(worklist.release(who, task_id), worklist, who)

    @app.post("/api/tasks/{task_id:path}/decide", response_model=TaskOut, responses=_ERRORS)
    def decide(task_id: TaskId, body: DecideIn, who: Who) -> TaskOut:
        """Decide: approve/reject an approval (with a comment) — or edit a proposed call's
        arguments —, or give an operator task its verdict. An unclaimed task is claimed and
        decided at once."""
        task = worklist.decide(
            who, task_id, Choice(body.decision), body.wire_comment(), body.arguments
        )
        return task_out(task, worklist, who)

    @app.get("/api/tasks/{task_id:path}", response_model=TaskOut, responses=_ERRORS)
    def show(task_id: TaskId, who: Who) -> TaskOut:
        """One task, with the question and the run's proposed answer."""
        return task_out(worklist.show(who, task_id), worklist, who)

    return app


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
