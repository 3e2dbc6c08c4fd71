"""Declarative agents: validation (precise refusals), the digest, and compiled agents run end to
end through the in-memory driver (approval, crash, replay with zero live calls)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from runplane.core import AgentRegistry, replay_history
from runplane.core.manifest import (
    ManifestError,
    compile_manifest,
    load_manifest,
    manifest_digest,
    validate_manifest,
)
from runplane.core.policy import parse_policy
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, RunStatus

AGENTS = Path(__file__).resolve().parents[2] / "examples" / "agents"


def _doc(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((AGENTS / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _messages(doc: Any) -> list[str]:
    return [str(p) for p in validate_manifest(doc)]


class Billing:
    """The billing peer of the ``collect`` example: invoices, charges by idempotency key."""

    def __init__(self) -> None:
        self.charges: dict[str, dict[str, Any]] = {}
        self.applied = 0

    def tools(self) -> dict[str, Any]:
        return {
            "fetch_invoice": self.fetch,
            "charge_card": self.charge,
            "get_charge": self.get_charge,
        }

    def fetch(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        return {"invoice_id": args["invoice_id"], "amount_cents": 1250, "currency": "EUR"}

    def charge(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        assert key is not None
        if key not in self.charges:
            self.applied += 1
            self.charges[key] = {"charge_id": f"ch-{len(self.charges) + 1}", **args}
        return self.charges[key]

    def get_charge(self, args: dict[str, Any], key: str | None) -> Any:
        return self.charges.get(key or "")


# ------------------------------------------------------------------ the examples, end to end


def test_summarise_drafts_asks_a_person_and_replays_with_zero_live_calls() -> None:
    spec = load_manifest(AGENTS / "summarise.yaml")
    assert spec.capability == "summarise" and spec.digest == manifest_digest(_doc("summarise.yaml"))
    model = ScriptedProvider(["A short summary."], name="openai")
    driver = Driver(spec, providers={"openai": model})
    run = driver.run("summarise", {"title": "Q3", "text": "Revenue went up. Costs went down."})
    assert run.status is RunStatus.AWAITING_HUMAN and run.task is not None
    assert json.loads(run.task.answer_json) == {"text": "A short summary."}
    assert run.task.role == "editor" and run.task.question == 'Release this summary of "Q3"?'
    assert (
        run.task.expires_ms is not None
        and run.task.expires_ms - run.task.opened_ms == 24 * 3_600_000
    )
    prompt = run.results[(0, 1)]
    assert prompt.family == "generation" and prompt.name == "model:openai/default"

    run = driver.decide(run.session_id, "APPROVED", by=("erin",))
    assert run.status is RunStatus.COMPLETED
    assert run.output == {
        "status": "approved",
        "text": "A short summary.",
        "decided_by": ["erin"],
        "steps": {},
    }
    assert model.calls == 1
    first = run.results[(0, 0)]
    assert (
        first.family == "manifest"
        and json.loads(first.value_json or "null")["digest"] == spec.digest
    )
    assert driver.verify(run.session_id).ok
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output


def test_summarise_rejected_returns_the_text_and_the_comment() -> None:
    spec = load_manifest(AGENTS / "summarise.yaml")
    driver = Driver(spec, providers={"openai": ScriptedProvider(["Draft."], name="openai")})
    run = driver.run("summarise", {"title": "t", "text": "x"})
    run = driver.decide(run.session_id, "REJECTED", comment="too vague")
    assert run.output == {"status": "rejected", "text": "Draft.", "comment": "too vague"}


def test_summarise_input_is_checked_against_the_declared_schema() -> None:
    spec = load_manifest(AGENTS / "summarise.yaml")
    assert spec.input_problem({"title": "t", "text": "x"}) is None
    problem = spec.input_problem({"title": "t"})
    assert problem is not None and "text" in problem


def test_collect_asks_before_the_first_mutating_step_and_charges_once_across_a_crash() -> None:
    spec = load_manifest(AGENTS / "collect.yaml")
    billing = Billing()
    crashed: list[bool] = []

    def hook(phase: str, call: Any) -> bool:
        if call.target == "charge_card" and phase == "after_act" and not crashed:
            crashed.append(True)  # charged at billing, not recorded: in doubt → probe
            return True
        return False

    driver = Driver(spec, tools=billing.tools(), crash_hook=hook)
    run = driver.run("collect", {"invoice_id": "inv-9"})
    assert (
        run.status is RunStatus.AWAITING_HUMAN and billing.applied == 0
    )  # nothing charged before the decision
    assert run.task is not None and json.loads(run.task.answer_json) == {
        "steps": {"invoice": {"invoice_id": "inv-9", "amount_cents": 1250, "currency": "EUR"}},
        "next": ["charge"],
    }
    run = driver.decide(run.session_id, "APPROVED")
    assert crashed and run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"invoice_id": "inv-9", "amount_cents": 1250, "charge_id": "ch-1"}
    assert billing.applied == 1 and list(billing.charges) == [f"collect/{run.session_id}/charge"]
    assert any(r.kind is JournalKind.EFFECT_IN_DOUBT for r in run.journal)
    assert driver.verify(run.session_id).ok
    assert replay_history(spec, run.snapshot, dict(run.results)).live_calls == 0


def test_generate_kind_and_unattended_expiry_only_with_both_opt_ins() -> None:
    doc = _doc("summarise.yaml")
    plain = copy.deepcopy(doc)
    plain["metadata"]["name"] = "plain"
    plain["spec"]["execution"]["kind"] = "generate"
    del plain["spec"]["oversight"]
    run = Driver(
        compile_manifest(plain), providers={"openai": ScriptedProvider(["hi"], name="openai")}
    ).run("plain", {"title": "a", "text": "b"})
    assert run.status is RunStatus.COMPLETED and run.output == {"text": "hi"}

    for on_expiry, unattended, expected in (("proceed", True, "approved"), ("fail", False, None)):
        d = copy.deepcopy(doc)
        d["spec"]["oversight"]["approval"].update(on_expiry=on_expiry, allow_unattended=unattended)
        driver = Driver(
            compile_manifest(d), providers={"openai": ScriptedProvider(["t"], name="openai")}
        )
        run = driver.run("summarise", {"title": "a", "text": "b"})
        run = driver.decide(
            run.session_id, "EXPIRED_PROCEEDED" if unattended else "EXPIRED_FAILED", by=()
        )
        if expected:
            assert (
                run.status is RunStatus.COMPLETED
                and run.output["status"] == expected
                and run.output["decided_by"] == []
            )
        else:
            assert (
                run.status is RunStatus.FAILED
                and run.error is not None
                and run.error.startswith("ApprovalExpired")
            )


def test_then_steps_run_only_after_approval_with_the_generated_text() -> None:
    doc = _doc("summarise.yaml")
    doc["spec"]["tools"] = [{"name": "publish", "mutating": True, "recovery": "retry"}]
    doc["spec"]["execution"]["then"] = [
        {
            "id": "post",
            "tool": "publish",
            "args": {
                "body": {"from": "generation", "path": "$.text"},
                "title": {"from": "input", "path": "$.title"},
                "channel": {"const": "news"},
            },
        }
    ]
    published: list[tuple[dict[str, Any], str | None]] = []
    spec = compile_manifest(doc)

    def publish(args: dict[str, Any], key: str | None) -> dict[str, int]:
        published.append((args, key))
        return {"id": 1}

    # Publishing generated text: the deployment declares the sink, its title protected (from
    # the input), so the generated body may go — the gate would refuse it to an undeclared
    # mutating tool.
    declared = (
        "sinks: {'tool://publish': {protected: [{path: $.title, sources: [input:admission]}]}}"
    )
    driver = Driver(
        spec,
        tools={"publish": publish},
        providers={"openai": ScriptedProvider(["S."], name="openai")},
        policy=parse_policy(declared),
    )
    run = driver.run("summarise", {"title": "T", "text": "x"})
    assert published == []
    run = driver.decide(run.session_id, "APPROVED")
    assert published == [
        ({"body": "S.", "title": "T", "channel": "news"}, f"summarise/{run.session_id}/post")
    ]
    assert run.output["steps"] == {"post": {"id": 1}}


def test_a_source_missing_at_run_time_fails_the_run_with_its_position() -> None:
    doc = _doc("collect.yaml")
    doc["spec"]["execution"]["output"]["charge_id"] = {"from": "charge", "path": "$.receipt.id"}
    driver = Driver(compile_manifest(doc), tools=Billing().tools(), approve="APPROVED")
    run = driver.run("collect", {"invoice_id": "i"})
    assert (
        run.status is RunStatus.FAILED
        and run.error
        == "SourceMissing: output.charge_id: charge.receipt.id does not exist in the value"
    )


def test_a_replay_under_a_changed_manifest_is_quarantined_at_the_first_call() -> None:
    spec = load_manifest(AGENTS / "summarise.yaml")
    driver = Driver(
        spec, providers={"openai": ScriptedProvider(["x"], name="openai")}, approve="APPROVED"
    )
    run = driver.run("summarise", {"title": "t", "text": "x"})
    assert run.status is RunStatus.COMPLETED
    changed = _doc("summarise.yaml")
    changed["spec"]["model"]["params"]["temperature"] = 1
    report = replay_history(compile_manifest(changed), run.snapshot, dict(run.results))
    assert report.status is RunStatus.QUARANTINED and "call_seq 0" in (report.divergence or "")


def test_registry_refuses_a_second_manifest_under_the_same_capability() -> None:
    registry = AgentRegistry()
    registry.register(load_manifest(AGENTS / "summarise.yaml"))
    registry.register(load_manifest(AGENTS / "summarise.yaml"))  # the same again: fine
    other = _doc("summarise.yaml")
    other["spec"]["oversight"]["approval"]["role"] = "anyone"
    with pytest.raises(ValueError, match="already registered"):
        registry.register(compile_manifest(other))


# ------------------------------------------------------------------ the digest


def test_digest_covers_the_whole_agent_and_ignores_key_order() -> None:
    doc = _doc("collect.yaml")
    reordered = json.loads(json.dumps(dict(reversed(list(doc.items())))))
    assert manifest_digest(reordered) == manifest_digest(doc)
    changed = copy.deepcopy(doc)
    changed["metadata"]["description"] = "another description"
    assert manifest_digest(changed) != manifest_digest(doc)
    assert compile_manifest(changed).digest == manifest_digest(changed)


# ------------------------------------------------------------------ refusals, precisely


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: d["spec"]["execution"].update(kind="chat"),
            "spec.execution.kind: must be one of generate, generate-then-approve, tool-sequence, plan, agent-loop, got 'chat'",
        ),
        (lambda d: d["spec"].update(memory=True), "spec.memory: unknown field 'memory'"),
        (
            lambda d: d["spec"]["tools"][0].update(retries=3),
            "spec.tools[0].retries: unknown field 'retries'",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"][1].update(tool="refund_card"),
            "spec.execution.steps[1].tool: tool 'refund_card' is not declared in spec.tools",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"][0]["args"].update(x={"from": "charge"}),
            "spec.execution.steps[0].args.x.from: 'charge' is not a source available here (sources here: input)",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"][0]["args"].update(
                x={"from": "input", "path": "$.amount"}
            ),
            "spec.execution.steps[0].args.x.path: input has no property 'amount'",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"][0]["args"].update(
                x={"from": "input", "path": "amount"}
            ),
            "spec.execution.steps[0].args.x.path: 'amount' is not a path",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"][0]["args"].update(x="{{ input.invoice_id }}"),
            "spec.execution.steps[0].args.x: must be a mapping",
        ),
        (
            lambda d: d["spec"]["tools"][1].pop("probe"),
            "spec.tools[1]: effect 'charge_card': recovery 'reconcile' needs a probe",
        ),
        (
            lambda d: d["spec"]["tools"][1].update(probe="ask_bank"),
            "spec.tools[1].probe: probe 'ask_bank' is not a declared tool",
        ),
        (
            lambda d: d["spec"]["tools"][0].pop("mutating"),
            "spec.tools[0]: missing required field 'mutating'",
        ),
        (
            lambda d: d["spec"]["oversight"]["approval"].update(on_expiry="ignore"),
            "spec.oversight.approval.on_expiry: must be one of fail, proceed, escalate",
        ),
        (
            lambda d: d["spec"]["oversight"]["approval"].update(allow_unattended=True),
            "spec.oversight.approval.allow_unattended: only applies with on_expiry: proceed",
        ),
        (
            lambda d: d["spec"]["oversight"]["approval"].update(
                question="Charge {{ steps.invoice }}?"
            ),
            "spec.oversight.approval.question: placeholder '{{ steps.invoice }}'",
        ),
        (
            lambda d: d["spec"].update(model={"provider": "openai", "name": "m"}),
            "spec.model: kind 'tool-sequence' makes no model call",
        ),
        (
            lambda d: d["spec"].update(durability="eventual"),
            "spec.durability: must be one of checkpointed, replayable",
        ),
        (lambda d: d.update(apiVersion="runplane/v2"), "apiVersion: must be 'runplane/v1'"),
        (
            lambda d: d["metadata"].update(name="Collect Money"),
            "metadata.name: 'Collect Money' is not a valid capability name",
        ),
        (lambda d: d["spec"]["input"]["schema"].update(type="objekt"), "spec.input.schema"),
        (
            lambda d: d["spec"]["execution"].update(prompt="hi"),
            "spec.execution.prompt: not a field of kind 'tool-sequence'",
        ),
        (
            lambda d: d["spec"]["execution"]["steps"].append(
                {"id": "invoice", "tool": "get_charge"}
            ),
            "spec.execution.steps[2].id: 'invoice' is already used by an earlier step",
        ),
    ],
)
def test_each_broken_rule_is_refused_with_its_position(edit: Any, expected: str) -> None:
    doc = _doc("collect.yaml")
    assert validate_manifest(doc) == []
    edit(doc)
    messages = _messages(doc)
    assert any(m.startswith(expected) for m in messages), messages
    with pytest.raises(ManifestError) as err:
        compile_manifest(doc, "collect.yaml")
    assert err.value.origin == "collect.yaml" and expected in str(err.value)


def test_generate_kinds_are_refused_without_their_pieces() -> None:
    doc = _doc("summarise.yaml")
    no_approval = copy.deepcopy(doc)
    no_approval["spec"]["oversight"]["approval"] = {"required": False}
    assert _messages(no_approval) == [
        "spec.oversight.approval.required: kind 'generate-then-approve' needs an approval with required: true"
    ]
    no_model = copy.deepcopy(doc)
    del no_model["spec"]["model"]
    assert "spec: missing required field 'model' (this kind makes a model call)" in _messages(
        no_model
    )
    gen = copy.deepcopy(doc)
    gen["spec"]["execution"]["kind"] = "generate"
    assert _messages(gen) == [
        "spec.oversight.approval.required: kind 'generate' takes no approval: use kind 'generate-then-approve'"
    ]
    then_bad = copy.deepcopy(doc)
    then_bad["spec"]["execution"]["then"] = [{"id": "x", "tool": "nope"}]
    assert _messages(then_bad) == [
        "spec.execution.then[0].tool: tool 'nope' is not declared in spec.tools (declared: none)"
    ]


def test_yaml_that_is_not_json_is_refused() -> None:
    doc = yaml.safe_load(
        "apiVersion: runplane/v1\nkind: Agent\nmetadata: {name: x, description: 2024-01-01}\nspec: {}"
    )
    assert _messages(doc)[0].startswith("(document): is not a JSON document")
    assert _messages("just text") == ["(document): must be a mapping, got str"]


# ------------------------------------------------------------------ runplane lint over YAML


def test_lint_checks_manifests_at_the_line_of_the_field_and_skips_other_yaml(
    tmp_path: Path,
) -> None:
    from runplane.core.manifest import lint_paths

    assert lint_paths([AGENTS]) == []
    text = (
        (AGENTS / "collect.yaml")
        .read_text(encoding="utf-8")
        .replace("tool: charge_card", "tool: refund_card")
    )
    (tmp_path / "bad.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "calendars.yaml").write_text(
        "holidays: [new-year]\n", encoding="utf-8"
    )  # not a manifest
    (tmp_path / "broken.yml").write_text("apiVersion: runplane/v1\nspec: [\n", encoding="utf-8")
    findings = lint_paths([tmp_path])
    by_file = {Path(f.path).name: f for f in findings}
    assert sorted(by_file) == ["bad.yaml", "broken.yml"] and all(
        f.code == "RPL100" for f in findings
    )
    bad = by_file["bad.yaml"]
    assert text.splitlines()[bad.line - 1].strip() == "tool: refund_card"
    assert bad.message.startswith(
        "spec.execution.steps[1].tool: tool 'refund_card' is not declared"
    )
    assert by_file["broken.yml"].message.startswith("not YAML")
    # Named explicitly, any YAML is checked as a manifest.
    explicit = lint_paths([tmp_path / "calendars.yaml"])
    assert len(explicit) == 5 and explicit[0].message.startswith("(document): ")
