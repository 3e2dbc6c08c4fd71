"""Read runplane's public audit stream and print one readable line per record.

Needs only confluent-kafka and fastavro (no runplane): the AuditRecord schema comes from the
``schemas/`` folder (``--schemas``), every writer schema runplane has written from its
``history/`` (by fingerprint), the wire format from the deployment:

* default — Avro single-object encoding: ``C3 01`` + 8-byte CRC-64-AVRO fingerprint of the
  schema's parsing canonical form + Avro body;
* ``--schema-registry URL`` — the Confluent format: ``00`` + 4-byte big-endian schema id +
  Avro body; the writer schema is fetched from the registry by id.

Reads ``read_committed`` (the journal service writes audit records in transactions; only
committed ones are facts), so each record is printed once.

    python examples/audit_consumer.py --bootstrap 127.0.0.1:19092 --topic runplane.audit --from-beginning
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError
from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def load_audit_schema(schemas: Path) -> tuple[Any, bytes]:
    """The parsed AuditRecord schema and its single-object fingerprint (wire byte order)."""
    parsed = load_schema(str(schemas / "runplane.v1.AuditRecord.avsc"), _write_hint=False)
    # fastavro's CRC-64-AVRO hex is already in the wire's little-endian order.
    return parsed, bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


def load_audit_writers(schemas: Path) -> dict[bytes, Any]:
    """Every AuditRecord schema runplane has written, by fingerprint (``schemas/history/``,
    one self-contained file per fingerprint: ``<name>.<fingerprint hex>.avsc``)."""
    return {
        bytes.fromhex(path.name.rsplit(".", 2)[1]): parse_schema(
            json.loads(path.read_text(encoding="utf-8")), _write_hint=False
        )
        for path in sorted((schemas / "history").glob("runplane.v1.AuditRecord.*.avsc"))
    }


class Decoder:
    """Turns a message value into the AuditRecord dict (either wire format)."""

    def __init__(self, schemas: Path, registry_url: str | None) -> None:
        self.reader, self.fp = load_audit_schema(schemas)
        # Older (and, once the newer history is fetched, newer) writers resolve to our reader.
        self.writers = {**load_audit_writers(schemas), self.fp: self.reader}
        self.registry = None
        self._by_id: dict[int, Any] = {}
        if registry_url:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self.registry = SchemaRegistryClient({"url": registry_url})

    def decode(self, data: bytes) -> dict[str, Any]:
        if self.registry is not None:
            if len(data) < 5 or data[0] != 0:
                raise ValueError("not Confluent-framed Avro")
            writer = self._writer(int.from_bytes(data[1:5], "big"))
            return self._read(data[5:], writer)
        if data[:2] != b"\xc3\x01" or len(data) < 10:
            raise ValueError("not Avro single-object encoding")
        writer = self.writers.get(data[2:10])
        if writer is None:
            raise ValueError(
                f"unknown schema fingerprint {data[2:10].hex()} (not an AuditRecord v1 in "
                "schemas/history/: a newer runplane wrote it, fetch its schemas/history/)"
            )
        return self._read(data[10:], writer)

    def _writer(self, schema_id: int) -> Any:
        if schema_id not in self._by_id:
            assert self.registry is not None
            schema = self.registry.get_schema(schema_id)
            self._by_id[schema_id] = parse_schema(
                json.loads(schema.schema_str or "null"), _write_hint=False
            )
        return self._by_id[schema_id]

    def _read(self, body: bytes, writer: Any) -> dict[str, Any]:
        rec = schemaless_reader(io.BytesIO(body), writer, self.reader)
        assert isinstance(rec, dict)
        return rec


def line(rec: dict[str, Any]) -> str:
    """One readable line: when, run, seq, kind, effect, cost, verdict."""
    when = (
        datetime.fromtimestamp(rec["stamp_ms"] / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        + "Z"
    )
    effect = " ".join(x for x in (rec.get("family"), rec.get("name")) if x)
    call = f" call {rec['era']}/{rec['call_seq']}" if rec.get("call_seq") is not None else ""
    cost = rec.get("cost")
    spent = f" cost {cost['tokens_in']}+{cost['tokens_out']} tok {cost['units']:g}u" if cost else ""
    verdict = rec["verdict"]
    if verdict == "BROKEN":
        verdict += f" at seq {rec.get('broken_at_seq')} ({rec.get('reason')})"
    elif verdict == "BODY_MISSING":
        verdict += f" ({rec.get('reason')})"
    who = "/".join(x for x in (rec.get("capability"), rec.get("case_id")) if x)
    return (
        f"{when} {rec['session_id']} #{rec['seq']} {rec['kind']}{call}"
        f"{' ' + effect if effect else ''}{spent} [{who}] {verdict}"
    )


class RunVerdicts:
    """Each run's verdict from its audit records, by the contract in ``schemas/README.md``.

    Delivery is at-least-once, so a record seen again is dropped — but only a VERIFIED or
    BODY_MISSING one, deduplicated on (session_id, seq). A BROKEN record is never dropped as
    a duplicate: a forged or re-sent record carries an old seq, and its BROKEN verdict is the
    only evidence. The first BROKEN record of a run names the break (``broken_at_seq``,
    ``reason``); later ones repeat it.
    """

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self._seen: set[tuple[str, int]] = set()

    def add(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Fold one record in; returns the run's verdict after it."""
        sid = rec["session_id"]
        run = self.runs.setdefault(
            sid, {"verdict": "VERIFIED", "broken_at_seq": None, "reason": None, "records": 0}
        )
        if rec["verdict"] == "BROKEN":
            if run["verdict"] != "BROKEN":
                run.update(
                    verdict="BROKEN", broken_at_seq=rec.get("broken_at_seq"), reason=rec["reason"]
                )
            return run
        if (sid, rec["seq"]) in self._seen:
            return run  # a re-delivery of a record already counted
        self._seen.add((sid, rec["seq"]))
        run["records"] += 1
        if rec["verdict"] == "BODY_MISSING" and run["verdict"] == "VERIFIED":
            run["verdict"] = "BODY_MISSING"
        return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--topic", default="runplane.audit")
    ap.add_argument("--group", default=None, help="consumer group (default: a fresh one)")
    ap.add_argument("--from-beginning", action="store_true")
    ap.add_argument(
        "--schema-registry", default=None, metavar="URL", help="read the Confluent wire format"
    )
    ap.add_argument("--schemas", type=Path, default=SCHEMAS, help="folder with the .avsc files")
    ap.add_argument("--max", type=int, default=0, help="stop after this many records (0: never)")
    ap.add_argument(
        "--idle-exit", type=float, default=0.0, help="stop after this many idle seconds (0: never)"
    )
    args = ap.parse_args(argv)

    decoder = Decoder(args.schemas, args.schema_registry)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group
            or f"audit-reader-{uuid.uuid4().hex[:8]}",  # runplane: allow RPL004 (not agent code)
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            "enable.auto.commit": True,
        }
    )
    consumer.subscribe([args.topic])
    printed, idle_since = 0, time.monotonic()
    try:
        while not (args.max and printed >= args.max):
            msg = consumer.poll(0.5)
            if msg is None:
                if args.idle_exit and time.monotonic() - idle_since > args.idle_exit:
                    break
                continue
            idle_since = time.monotonic()
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    print(f"# consumer error: {err.str()}", file=sys.stderr)
                continue
            try:
                print(line(decoder.decode(msg.value() or b"")), flush=True)
            except Exception as exc:  # one bad record must not stop an audit tail
                print(
                    f"# {msg.topic()}[{msg.partition()}]@{msg.offset()}: undecodable: {exc}",
                    file=sys.stderr,
                )
            printed += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
