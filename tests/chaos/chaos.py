"""The chaos suite's driver: runs under faults, then the promises checked from Kafka alone.

Runs the platform as real processes (admission, cases, worklist, journal, several executors)
against a running stack, emits refund runs through admission (each key once, a share of them
twice), approves every approval by script, and meanwhile SIGKILLs and restarts random
services; on a multi-broker stack it also kills the broker that leads the most ``runs.inbox``
partitions and restarts it, and pauses another one (SIGSTOP) past the broker session timeout.

Then, from Kafka alone (plus the billing fake's own side-effect ledger):

- **lost runs**: every key emitted has a claim, and every claimed run ended or is parked with a
  reason (an operator task);
- **double admissions**: one RunAdmitted per admission key in ``journal``;
- **effects twice**: no idempotency key charged twice at billing (its ledger);
- **chains**: every run's chain verifies (``runplane.core.verify_chain`` with bodies), and
  no record of it is BROKEN on the ``audit`` stream — where the journal service also checks
  every record's writer signature (the services run with a fresh signing key);
- **in doubt**: every EFFECT_IN_DOUBT was resolved by the call's declared recovery (refund's
  charge: ``reconcile`` — the run completed with one charge, or parked for an operator).

``python -m tests.chaos.chaos --runs 1000`` (``make chaos``) writes ``bench/chaos.md``; the
short test in ``tests/chaos/test_chaos.py`` calls :func:`run` with a few dozen runs.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from runplane.config import Settings, example_tools_config
from runplane.core import verify_chain
from runplane.fakes import FakeBillingServer, FakeOpenAIServer, read_counts
from runplane.signing.admission import SigningKey
from runplane.stack import StackConfig, cluster_size
from runplane.wire import (
    AdmissionClaim,
    AdmissionRequest,
    AuditRecord,
    CaseRecord,
    DecisionOutcome,
    JournalKind,
    JournalRecord,
    OpenTask,
    ParkKind,
    ResultEntry,
    RunStatus,
    TaskDecision,
    TaskKind,
    Verdict,
    serde_for,
)
from tests.helpers.harness import plain_producer, read_topic, sessions

ROOT = Path(__file__).resolve().parents[2]
RUNPLANE = Path(sys.executable).parent / "runplane"
SERVICES = ("admission", "cases", "worklist", "journal")


class Service:
    """One platform process (``runplane serve NAME``), killable and restartable."""

    def __init__(self, name: str, instance: str, env: dict[str, str], logs: Path) -> None:
        self.name, self.instance, self.env, self.logs = name, instance, env, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.kills = 0
        self.exits: list[int] = []  # exit codes of the times it stopped on its own

    def start(self) -> None:
        self._log = (self.logs / f"{self.instance}.log").open("ab")
        env = {**self.env, "RUNPLANE_INSTANCE_ID": self.instance}
        self.proc = subprocess.Popen(
            [str(RUNPLANE), "serve", self.name],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.kills += 1
        if self._log is not None:
            self._log.close()

    def revive(self) -> None:
        """Restart it if it exited on its own (what a supervisor would do), noting how."""
        if self.proc is not None and (code := self.proc.poll()) is not None:
            self.exits.append(code)
            if self._log is not None:
                self._log.close()
            self.start()

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        if self.proc is not None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()


@dataclass
class Figures:
    """What the suite measured; :meth:`markdown` is ``bench/chaos.md``."""

    runs: int = 0
    emitted: int = 0
    duplicates_sent: int = 0
    completed: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    parked_operator: int = 0
    lost: list[str] = field(default_factory=list)
    double_admissions: list[str] = field(default_factory=list)
    charged_twice: list[str] = field(default_factory=list)
    triage_runs: int = 0
    case_written_twice: list[str] = field(default_factory=list)
    broken_chains: list[str] = field(default_factory=list)
    in_doubt: int = 0
    runs_in_doubt: int = 0
    in_doubt_by_recovery: dict[str, int] = field(default_factory=dict)
    in_doubt_unresolved: list[str] = field(default_factory=list)
    service_kills: dict[str, int] = field(default_factory=dict)
    service_exits: dict[str, list[int]] = field(default_factory=dict)
    audit_broken: list[str] = field(default_factory=list)
    broker_events: list[str] = field(default_factory=list)
    seconds: float = 0.0
    load: str = ""

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.double_admissions
            or self.charged_twice
            or self.case_written_twice
            or self.broken_chains
            or self.in_doubt_unresolved
            or self.audit_broken
        )

    def markdown(self) -> str:
        verified = self.runs - len(self.broken_chains)
        pct = 100.0 * verified / self.runs if self.runs else 0.0
        kills = ", ".join(f"{k} {v}" for k, v in sorted(self.service_kills.items()))
        ended = ", ".join(f"{k}: {v}" for k, v in sorted(self.failed.items()))
        recoveries = ", ".join(f"{k} {v}" for k, v in sorted(self.in_doubt_by_recovery.items()))
        exits = ", ".join(f"{k} {v}" for k, v in sorted(self.service_exits.items()) if v)
        rows = [
            ("runs admitted", self.runs),
            ("admission requests (duplicates sent)", f"{self.emitted} ({self.duplicates_sent})"),
            ("completed / parked for an operator", f"{self.completed} / {self.parked_operator}"),
            ("ended otherwise (status, error: count)", ended or "none"),
            ("lost runs", len(self.lost)),
            ("double admissions", len(self.double_admissions)),
            ("refund / triage runs", f"{self.runs - self.triage_runs} / {self.triage_runs}"),
            # The fake counts every POST /charges per idempotency key, also one it dedupes: a
            # second invocation is a mutating call issued twice, applied once by the peer.
            ("charge_card invoked twice for one key (billing's ledger)", len(self.charged_twice)),
            (
                "case writes or deadlines applied twice (the cases topic)",
                len(self.case_written_twice),
            ),
            ("chains verified", f"{verified}/{self.runs} ({pct:.1f}%)"),
            ("runs BROKEN on the audit stream", len(self.audit_broken)),
            (
                "EFFECT_IN_DOUBT records / runs with one / runs left unresolved",
                f"{self.in_doubt} / {self.runs_in_doubt} / {len(self.in_doubt_unresolved)}",
            ),
            ("EFFECT_IN_DOUBT by declared recovery", recoveries or "none"),
            ("SIGKILLs (service: count)", kills or "none"),
            ("exits on their own, restarted (service: codes)", exits or "none"),
            ("broker faults", "; ".join(self.broker_events) or "none (single broker)"),
            ("wall time", f"{self.seconds:.0f} s"),
            ("machine load during the run", self.load),
        ]
        body = "\n".join(f"| {k} | {v} |" for k, v in rows)
        return f"| figure | value |\n| --- | --- |\n{body}\n"


EMITTER = SigningKey.generate("chaos-emitter-1")


def _emitters_file(logs: Path) -> Path:
    """Admission's registry: the suite's emitter speaks for tenant ``acme`` (signed admission)."""
    path = logs / "emitters.yaml"
    path.write_text(
        "emitters:\n"
        "  - name: chaos-emitter\n"
        "    tenant: acme\n"
        "    keys:\n"
        f"      - id: {EMITTER.key_id}\n"
        f"        public_key: {EMITTER.public_b64()}\n"
    )
    return path


def _env(settings: Settings, billing_url: str, openai_url: str, logs: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_REPLICATION_FACTOR": str(settings.replication_factor),
        "RUNPLANE_REDIS_URL": settings.redis_url,
        "RUNPLANE_AGENT_MODULES": "examples.refund,examples.triage",
        # Naming agent modules drops the examples' default tools config: name it again.
        "RUNPLANE_TOOLS_CONFIG": example_tools_config() or "",
        "RUNPLANE_BILLING_URL": billing_url,
        "RUNPLANE_OPENAI_BASE_URL": openai_url,
        "RUNPLANE_EXECUTOR_BATCH_MS": "5",
        "RUNPLANE_LOG_LEVEL": "WARNING",
        "RUNPLANE_WORKLIST_PRINCIPALS_FILE": str(ROOT / "examples" / "principals.yaml"),
        "RUNPLANE_ADMISSION_EMITTERS_FILE": str(_emitters_file(logs)),
    }
    for name in ("admission", "executor", "cases", "sweeper", "worklist", "journal"):
        env[f"RUNPLANE_{name.upper()}_PORT"] = "0"
    # The chain writers sign what they journal and the journal service checks it: a record
    # a crash or a restart left without a valid signature would be BROKEN on the audit stream.
    # One key per state dir, kept across runs: the topics are, and a journal service that
    # re-reads records a previous run signed must know that run's key (a rotation that drops
    # the old public key turns its records into bad_signature — correctly).
    key_file = logs / "journal-signing.key"
    if not key_file.exists():
        key_file.write_text(SigningKey.generate("chaos-journal").to_text())
    key = SigningKey.from_text(key_file.read_text())
    env["RUNPLANE_JOURNAL_SIGNING_KEY"] = key.to_text()
    env["RUNPLANE_JOURNAL_PUBLIC_KEYS"] = f"{key.key_id}:{key.public_b64()}"
    return env


TRIAGE_EVERY = 3  # every third key is a triage run: a generation, a case write, a deadline


def _emit(producer: Producer, settings: Settings, key: str, i: int, tag: str) -> None:
    triage = i % TRIAGE_EVERY == 1
    request = AdmissionRequest(
        admission_key=key,
        capability="triage" if triage else "refund",
        input_json=json.dumps(
            {"ticket": f"billing: ticket {tag}-{i}"} if triage else {"invoice_id": f"INV-{tag}-{i}"}
        ),
        # One case per ticket: its state is written once and one obligation registered, so a
        # case at version 2 or with two obligations is an effect performed twice.
        correlation_keys={"ticket": f"T-{tag}-{i}"} if triage else {},
        tenant="acme",
        initiator="emitter",
        requested_ms=int(time.time() * 1000),
    )
    deliver(producer, settings, "admission", key, request, signer=EMITTER)


def deliver(
    producer: Producer,
    settings: Settings,
    topic: str,
    key: str,
    record: Any,
    *,
    signer: SigningKey | None = None,
) -> None:
    """Produce until the broker acknowledged it (acks=all): an emitter retries with the same
    key, so a broker fault in the middle costs a duplicate request, never a lost one."""
    value = serde_for(settings).encode(topic, record)
    errors: list[object] = []
    for _ in range(20):
        errors.clear()
        now_ms = int(time.time() * 1000)
        producer.produce(
            settings.topic(topic),
            key=key.encode(),
            value=value,
            timestamp=now_ms,
            headers=None if signer is None else list(signer.headers(key.encode(), value, now_ms)),
            on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
        )
        if producer.flush(60) == 0 and not errors:
            return
        time.sleep(1.0)
    raise RuntimeError(f"{topic}: {key} was not acknowledged after 20 attempts")


def _approver(settings: Settings, stop: threading.Event) -> None:
    """Decide every approval task as it opens (a script standing in for the worklist's people)."""
    producer = plain_producer(settings)
    decided: set[str] = set()
    while not stop.wait(1.0):
        try:
            records = read_topic(settings, "tasks.commands", timeout_s=20)
        except Exception:  # a broker fault mid-read: next round
            continue
        for _, record in records:
            if not (isinstance(record, OpenTask) and record.kind is TaskKind.APPROVAL):
                continue
            if record.task_id in decided:
                continue
            decision = TaskDecision(
                session_id=record.session_id,
                task_id=record.task_id,
                era=record.era,
                call_seq=record.call_seq,
                outcome=DecisionOutcome.APPROVED,
                decided_by=("approver",),
                decided_ms=int(time.time() * 1000),
            )
            deliver(producer, settings, "runs.inbox", record.session_id, decision)
            decided.add(record.task_id)


def _inbox_leader(settings: Settings) -> int | None:
    """The broker that leads the most ``runs.inbox`` partitions (the busiest one)."""
    meta = AdminClient({"bootstrap.servers": settings.bootstrap_servers}).list_topics(timeout=10)
    topic = meta.topics.get(settings.topic("runs.inbox"))
    if topic is None:
        return None
    leaders = [p.leader for p in topic.partitions.values()]
    return max(set(leaders), key=leaders.count) if leaders else None


def _broker_pid(config: StackConfig, node: int) -> int | None:
    try:
        return int((config.run_dir / f"kafka-{node}.pid").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _broker_faults(
    settings: Settings, config: StackConfig, stop: threading.Event, events: list[str]
) -> None:
    """Kill the busiest broker and bring it back; later pause another past the session timeout."""
    if stop.wait(15):
        return
    leader = _inbox_leader(settings) or 1
    pid = _broker_pid(config, leader)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        events.append(f"SIGKILL kafka-{leader} (leader of most runs.inbox partitions)")
        if stop.wait(10):
            return
        subprocess.run(
            [str(RUNPLANE), "up", "--no-topics"], cwd=ROOT, capture_output=True, check=False
        )
        events.append(f"kafka-{leader} restarted")
    if stop.wait(15):
        return
    other = 1 + leader % cluster_size(config)
    pid = _broker_pid(config, other)
    if pid is not None:
        os.kill(pid, signal.SIGSTOP)
        events.append(f"SIGSTOP kafka-{other} for 20 s (broker session timeout 9 s)")
        stop.wait(20)
        os.kill(pid, signal.SIGCONT)
        events.append(f"SIGCONT kafka-{other}")


def _killer(
    services: list[Service], stop: threading.Event, every_s: float, rng: random.Random
) -> None:
    next_kill = time.monotonic() + every_s * (0.5 + rng.random())
    while not stop.wait(0.5):
        for s in services:
            s.revive()
        if time.monotonic() < next_kill:
            continue
        victim = rng.choice(services)
        victim.kill()
        stop.wait(1.0 + 2 * rng.random())
        victim.start()
        next_kill = time.monotonic() + every_s * (0.5 + rng.random())


def run(
    settings: Settings,
    *,
    runs: int,
    executors: int = 3,
    chaos_seconds: float = 60.0,
    kill_every_s: float = 6.0,
    settle_timeout_s: float = 300.0,
    logs: Path,
    seed: int = 18,
    say: Callable[[str], None] = lambda _m: None,
) -> Figures:
    """Run the suite against the stack ``settings`` points at; returns the figures."""
    rng = random.Random(seed)
    started = time.monotonic()
    figures = Figures(load=_load())
    logs.mkdir(parents=True, exist_ok=True)
    with (
        FakeBillingServer(counts_path=logs / "billing.json", charge_delay_s=0.2) as billing,
        FakeOpenAIServer() as openai,
    ):
        env = _env(settings, billing.url, openai.url, logs)
        services = [Service(n, f"{n}-0", env, logs) for n in SERVICES]
        services += [Service("executor", f"executor-{i}", env, logs) for i in range(executors)]
        for s in services:
            s.start()
        chaos, approvals = threading.Event(), threading.Event()
        faults = [threading.Thread(target=_killer, args=(services, chaos, kill_every_s, rng))]
        config = StackConfig.from_settings(settings)
        if cluster_size(config) >= 3:
            faults.append(
                threading.Thread(
                    target=_broker_faults, args=(settings, config, chaos, figures.broker_events)
                )
            )
        approver = threading.Thread(target=_approver, args=(settings, approvals), daemon=True)
        approver.start()
        for t in faults:
            t.start()
        try:
            keys = _emit_all(settings, runs, figures, chaos_seconds, say)
            time.sleep(max(0.0, chaos_seconds - (time.monotonic() - started)))
            say("chaos over; letting every run settle")
            chaos.set()
            for t in faults:
                t.join(60)
            _settle(settings, keys, settle_timeout_s, services, say)
        finally:
            chaos.set()
            approvals.set()
            approver.join(30)
            for s in services:  # all at once: each may take its termination grace
                s.terminate()
            for s in services:
                s.stop()
        for s in services:
            figures.service_kills[s.name] = figures.service_kills.get(s.name, 0) + s.kills
            figures.service_exits.setdefault(s.name, []).extend(s.exits)
        _check(settings, keys, read_counts(logs / "billing.json").charges, figures)
    figures.seconds = time.monotonic() - started
    return figures


def _emit_all(
    settings: Settings,
    runs: int,
    figures: Figures,
    spread_s: float,
    say: Callable[[str], None],
) -> list[str]:
    """Emit ``runs`` keys across the first half of the chaos window; re-send every tenth."""
    producer = plain_producer(settings)
    tag = f"{int(time.time())}"
    keys = [f"chaos-{tag}-{i}" for i in range(runs)]
    pause = (spread_s / 2) / max(1, runs)
    for i, key in enumerate(keys):
        _emit(producer, settings, key, i, tag)
        figures.emitted += 1
        if i % 10 == 3:
            _emit(producer, settings, key, i, tag)
            figures.emitted += 1
            figures.duplicates_sent += 1
        time.sleep(pause)
    say(f"emitted {figures.emitted} admission requests for {runs} keys")
    return keys


def _claims(settings: Settings) -> dict[str, AdmissionClaim]:
    # By admission key: the table's rows are per (tenant, key), these runs are one tenant's.
    return {
        v.admission_key: v
        for v in _table(settings, "admission.claims").values()
        if isinstance(v, AdmissionClaim)
    }


def _table(settings: Settings, topic: str) -> dict[str, Any]:
    from runplane.kafka.restore import restore_table

    serde = serde_for(settings)
    return restore_table(
        settings,
        settings.topic(topic),
        range(settings.partitions),
        lambda data: serde.decode(topic, data),
        timeout_s=120,
    )


def _settled(snap: Any) -> bool:
    if snap.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED):
        return True
    return snap.parked_on is not None and snap.parked_on.kind is ParkKind.OPERATOR


def _settle(
    settings: Settings,
    keys: list[str],
    timeout_s: float,
    services: list[Service],
    say: Callable[[str], None],
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for s in services:
            s.revive()
        try:
            claims = _claims(settings)
            snaps = sessions(settings)
        except Exception:
            time.sleep(2)
            continue
        runs = [claims[k].run_id for k in keys if k in claims]
        done = sum(1 for r in runs if r in snaps and _settled(snaps[r]))
        say(f"settled {done}/{len(keys)} (claimed {len(runs)})")
        if len(runs) == len(keys) and done == len(keys):
            return
        time.sleep(3)


def _check(settings: Settings, keys: list[str], charges: dict[str, int], figures: Figures) -> None:
    claims = _claims(settings)
    snaps = sessions(settings)
    chains: dict[str, list[JournalRecord]] = {}
    for key, record in read_topic(settings, "journal", timeout_s=300):
        if isinstance(record, JournalRecord) and key == record.session_id:
            chains.setdefault(key, []).append(record)  # topic order, as every reader reads
    bodies: dict[str, dict[tuple[int, int], ResultEntry]] = {}
    for _, entry in read_topic(settings, "results", timeout_s=300):
        if isinstance(entry, ResultEntry):
            bodies.setdefault(entry.session_id, {})[(entry.era, entry.call_seq)] = entry
    broken_on_audit = {
        a.session_id
        for _, a in read_topic(settings, "audit", timeout_s=300)
        if isinstance(a, AuditRecord) and a.verdict is Verdict.BROKEN
    }
    cases = {k: v for k, v in _table(settings, "cases").items() if isinstance(v, CaseRecord)}
    admitted: dict[str, set[str]] = {}
    for sid, records in chains.items():
        for r in records:
            if r.kind is JournalKind.RUN_ADMITTED:
                admitted.setdefault(r.attrs.get("admission_key", ""), set()).add(sid)
    figures.double_admissions = [k for k in keys if len(admitted.get(k, ())) > 1]
    for key in keys:
        claim = claims.get(key)
        snap = None if claim is None else snaps.get(claim.run_id)
        if claim is None or snap is None or not _settled(snap):
            figures.lost.append(key)
            continue
        figures.runs += 1
        sid = claim.run_id
        if snap.status is RunStatus.COMPLETED:
            figures.completed += 1
        elif snap.parked_on is not None and snap.parked_on.kind is ParkKind.OPERATOR:
            figures.parked_operator += 1
        else:
            why = f"{snap.status} {snap.error.type if snap.error else ''}".strip()
            figures.failed[why] = figures.failed.get(why, 0) + 1
        records = chains.get(sid, [])
        if not verify_chain(records, bodies.get(sid, {})).ok:
            figures.broken_chains.append(sid)
        if sid in broken_on_audit:
            figures.audit_broken.append(sid)
        doubts = [r for r in records if r.kind is JournalKind.EFFECT_IN_DOUBT]
        figures.in_doubt += len(doubts)
        figures.runs_in_doubt += bool(doubts)
        if claim.case_id is not None:
            figures.triage_runs += 1
            case = cases.get(claim.case_id)
            # Written once at version 0 → 1, one obligation registered: anything else is a
            # case write or a deadline the cases service applied twice (or lost).
            if snap.status is RunStatus.COMPLETED and (
                case is None or case.version != 1 or len(case.obligations) != 1
            ):
                figures.case_written_twice.append(sid)
        charged = charges.get(f"refund/{sid}", 0)
        if charged > 1:
            figures.charged_twice.append(sid)
        for d in doubts:
            how = d.attrs.get("recovery", "?")
            figures.in_doubt_by_recovery[how] = figures.in_doubt_by_recovery.get(how, 0) + 1
        # Resolved by its declared recovery: handed to an operator with the reason, or the run
        # went on and completed — a refund (charge_card: reconcile) with exactly one charge at
        # billing, a triage (generation: retry; case commands idempotent by request id) as is.
        operator = snap.parked_on is not None and snap.parked_on.kind is ParkKind.OPERATOR
        completed = snap.status is RunStatus.COMPLETED and (
            claim.case_id is not None or charged == 1
        )
        if doubts and not (operator or completed):
            figures.in_doubt_unresolved.append(sid)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cores"


HEADER = """# Chaos suite (`make chaos`)

Written by `tests/chaos/chaos.py` (the figures of the last `make chaos` run, {runs} keys): the
refund agent (fetch_invoice, an approval decided by a script, charge_card — mutating, recovery
`reconcile` with the `get_charge` probe — against the billing fake, which keeps its own ledger
of charges per idempotency key) through signed admission, three executors, cases, worklist and
the journal service, on a local three-broker KRaft cluster (RF 3, min.insync.replicas 2). During
the chaos window every few seconds a random service is SIGKILLed and restarted; the broker that
leads the most `runs.inbox` partitions is SIGKILLed and restarted; another broker is paused with
SIGSTOP for 20 s (broker session timeout 9 s). The journal is signed (a fresh Ed25519 key per
run) and the journal service checks every signature. Afterwards everything is read back from
Kafka (claims, sessions, journal, results, audit) and from the billing ledger.

"""


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="runplane chaos suite")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--executors", type=int, default=3)
    ap.add_argument("--chaos-seconds", type=float, default=240.0)
    ap.add_argument("--settle-seconds", type=float, default=900.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "chaos.md")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    figures = run(
        settings,
        runs=args.runs,
        executors=args.executors,
        chaos_seconds=args.chaos_seconds,
        settle_timeout_s=args.settle_seconds,
        logs=settings.state_dir / "chaos",
        say=lambda m: print(m, flush=True),
    )
    table = figures.markdown()
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(HEADER.format(runs=args.runs) + table)
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
