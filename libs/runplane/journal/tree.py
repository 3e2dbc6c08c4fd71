"""A run's commission tree, folded from journal records. Pure.

A parent's journal names each child it commissioned: the commission's EFFECT_ANNOUNCED carries
``child_key`` (the derived admission key) and its EFFECT_RECORDED carries ``child_run`` (the
child's run id). A child's RUN_ADMITTED carries ``parent_run`` and ``parent_call`` and its
admission key, ``runplane.child/<parent>/<era>/<call_seq>``, which names the parent too. ``runplane runs tree``
reads each run's records and folds them here, both ways. A child that runs under a
delegation shows its sinks (seq 0's ``delegation`` attr: the chain commits to it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from runplane.core.keys import parent_of
from runplane.wire import JournalKind, JournalRecord

__all__ = ["TreeNode", "children_of", "parent_link", "tree"]


@dataclass(frozen=True)
class TreeNode:
    run_id: str
    capability: str
    status: str
    node: str = ""  # the plan node (or parallel branch) that commissioned it
    children: tuple[TreeNode, ...] = field(default=())
    # The sinks of the delegation the run runs under (None: it runs under none).
    delegated_sinks: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "capability": self.capability,
            "status": self.status,
            "node": self.node,
            "delegated_sinks": None if self.delegated_sinks is None else list(self.delegated_sinks),
            "children": [c.to_json() for c in self.children],
        }

    def lines(self, indent: str = "") -> list[str]:
        label = f"{self.run_id}  {self.capability}  {self.status}"
        head = f"{indent}{label}" + (f"  (node {self.node})" if self.node else "")
        if self.delegated_sinks is not None:
            head += f"  (delegated sinks: {', '.join(self.delegated_sinks) or 'none'})"
        out = [head]
        for child in self.children:
            out += child.lines(indent + "  ")
        return out


def children_of(records: Iterable[JournalRecord]) -> list[tuple[str, str]]:
    """(child run id, node) for each commission the run recorded, in journal order."""
    return [
        (r.attrs["child_run"], r.attrs.get("node", ""))
        for r in records
        if r.family == "commission"
        and r.kind is JournalKind.EFFECT_RECORDED
        and "child_run" in r.attrs
    ]


def parent_link(records: Iterable[JournalRecord]) -> str | None:
    """The parent run of a commissioned run (its RUN_ADMITTED's ``parent_run``, or its
    admission key), else None."""
    for r in records:
        if r.kind is JournalKind.RUN_ADMITTED:
            parent = parent_of(r.attrs.get("admission_key", ""))
            return r.attrs.get("parent_run") or (None if parent is None else parent[0])
    return None


def _status(records: list[JournalRecord]) -> str:
    ends = {
        JournalKind.RUN_COMPLETED: "COMPLETED",
        JournalKind.RUN_FAILED: "FAILED",
        JournalKind.RUN_QUARANTINED: "QUARANTINED",
        JournalKind.RUN_CANCELLED: "CANCELLED",
    }
    return next(
        (ends[r.kind] for r in reversed(records) if r.kind in ends),
        "RUNNING" if records else "UNKNOWN",
    )


def tree(
    run_id: str, read: Callable[[str], list[JournalRecord]], node: str = "", depth: int = 8
) -> TreeNode:
    """The tree under ``run_id``; ``read`` gives a run's records (a bounded depth guards
    against a forged cycle of links)."""
    records = read(run_id)
    admitted = next((r for r in records if r.kind is JournalKind.RUN_ADMITTED), None)
    capability = "" if admitted is None else admitted.attrs.get("capability", "")
    kids = () if depth <= 0 else tuple(tree(c, read, n, depth - 1) for c, n in children_of(records))
    sinks = None if admitted is None else _delegated_sinks(admitted.attrs.get("delegation"))
    return TreeNode(run_id, capability, _status(records), node, kids, sinks)


def _delegated_sinks(text: str | None) -> tuple[str, ...] | None:
    """The sinks of the delegation a run's seq 0 names (the last link's: what it may reach)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        if isinstance(data, dict) and "chain" not in data and "allotment" in data:
            return None  # an allotment alone (core.allotments): no sinks delegated
        return tuple(str(s) for s in data["chain"][-1]["sinks"])
    except (ValueError, KeyError, IndexError, TypeError):
        return ("<unreadable delegation>",)
