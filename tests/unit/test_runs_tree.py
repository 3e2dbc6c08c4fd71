"""``runplane runs tree``'s fold: a parent names its children, a child its parent."""

from __future__ import annotations

from test_fanout import _agents

from runplane.journal.tree import children_of, parent_link, tree
from runplane.testing import Driver


def test_the_tree_of_a_fan_out_of_commissions() -> None:
    d = Driver(_agents())
    view = d.run("triage", {"amount": 3})

    def read(rid: str) -> list:  # type: ignore[type-arg]
        return list(d.view(rid).journal)

    root = tree(view.session_id, read)
    assert root.capability == "triage" and root.status == "COMPLETED"
    assert {(c.capability, c.node) for c in root.children} == {
        ("fraud.check", "fraud_check"),
        ("risk.score", "risk_score"),
        ("decide", "aggregate"),
    }
    assert parent_link(view.journal) is None
    for child, _ in children_of(view.journal):
        assert parent_link(read(child)) == view.session_id
    assert root.lines()[0].startswith(view.session_id)
    assert root.to_json()["children"]
