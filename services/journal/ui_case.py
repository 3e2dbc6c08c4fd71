"""The runs UI's run page, beyond the timeline: the run's case (state and obligations) and
its parent and children. Pure HTML rendering of values the page has read.

- **Case.** The latest record of the run's case on ``cases`` (the cases service's own table,
  read like the run's journal: straight from Kafka, within the API's scan limit): version,
  open or closed, and each obligation — status, due and warn instants, calendar, what a breach
  starts, the sweep run that breached it (a link). The case *state* is business data, so it is
  shown, like result bodies in the API, only to a principal with the role ``auditor``; others
  see its size and that it is there.
- **Parent and children.** From the run's own records, folded by ``runplane.journal.tree``
  (the same fold as ``runplane runs tree``): a commissioned run's RUN_ADMITTED names its
  parent, each commission's EFFECT_RECORDED its child (and the plan node). Other facts that
  name a run (a fork's origin, a successor) are listed as other links. Every link opens the
  run's page, where the tenant rule applies again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from runplane.journal.tree import children_of, parent_link
from runplane.web import e, when
from runplane.wire import CaseRecord, JournalRecord, Obligation

__all__ = ["case_section", "related_section"]

# Facts the parent/children fold already shows; every other ``*_run`` fact is an other link.
_TREE_FACTS = frozenset({"parent_run", "child_run"})
_OBLIGATION_CLASS = {"MET": "ok", "OPEN": "wait", "WARNED": "wait", "BREACHED": "bad"}


def _run_link(run_id: str, href: Callable[[str], str]) -> str:
    return f'<a href="{e(href(run_id))}"><code>{e(run_id)}</code></a>'


def related_section(
    records: Sequence[JournalRecord],
    others: Iterable[tuple[str, str]],
    href: Callable[[str], str],
) -> str:
    """ "Parent and children": the run's parent (or that admission started it), the runs it
    commissioned (with the plan node), and ``others`` — (fact, run id) naming other runs."""
    parent = parent_link(records)
    parent_html = (
        _run_link(parent, href)
        if parent is not None
        else '<span class="muted">none: admitted from outside</span>'
    )
    kids = children_of(records)
    kids_html = (
        "<ul>"
        + "".join(
            f"<li>{_run_link(child, href)}"
            + (f' <span class="muted">node {e(node)}</span>' if node else "")
            + "</li>"
            for child, node in kids
        )
        + "</ul>"
        if kids
        else '<span class="muted">none</span>'
    )
    rest = [(k, v) for k, v in others if k not in _TREE_FACTS and v != parent]
    rest_html = (
        "<div><dt>Other links</dt><dd><ul>"
        + "".join(f"<li>{e(k.replace('_', ' '))}: {_run_link(v, href)}</li>" for k, v in rest)
        + "</ul></dd></div>"
        if rest
        else ""
    )
    return (
        '<section class="card related" aria-label="Parent and children">'
        '<h2>Parent and children</h2><dl class="facts">'
        f"<div><dt>Parent</dt><dd>{parent_html}</dd></div>"
        f"<div><dt>Children ({len(kids)})</dt><dd>{kids_html}</dd></div>"
        f"{rest_html}</dl></section>"
    )


def case_section(
    case_id: str | None,
    case: CaseRecord | None,
    *,
    show_state: bool,
    href: Callable[[str], str],
    problem: str | None = None,
) -> str:
    """ "Case": the run's case as its latest record states it (``problem``: why it could not
    be read). Empty for a run with no case."""
    if case_id is None:
        return ""
    head = f'<section class="card case" aria-label="Case"><h2>Case <code>{e(case_id)}</code></h2>'
    if case is None:
        why = problem or "no record of this case on the cases topic (yet)"
        return f'{head}<p class="note">{e(why)}</p></section>'
    facts = (
        '<dl class="facts">'
        f"<div><dt>Version</dt><dd>{case.version}</dd></div>"
        f"<div><dt>Status</dt><dd>{'closed' if case.closed else 'open'}</dd></div>"
        f"<div><dt>Updated</dt><dd>{when(case.updated_ms)}</dd></div>"
        "</dl>"
    )
    return (
        f"{head}{facts}{_state(case, show_state)}{_obligations(case.obligations, href)}</section>"
    )


def _state(case: CaseRecord, show: bool) -> str:
    if not show:
        size = len(case.state_json.encode("utf-8"))
        return (
            f'<p class="note">Case state: {size} bytes, shown to auditors only '
            "(like result bodies).</p>"
        )
    try:
        pretty = json.dumps(json.loads(case.state_json), indent=2, sort_keys=True)
    except ValueError:
        pretty = case.state_json
    return f'<h3>State</h3><pre class="case-state">{e(pretty)}</pre>'


def _obligations(obligations: Sequence[Obligation], href: Callable[[str], str]) -> str:
    if not obligations:
        return '<h3>Obligations</h3><p class="muted">none</p>'
    rows = "".join(
        f'<tr class="obligation-{_OBLIGATION_CLASS.get(str(o.status), "")}">'
        f"<td>{e(o.name)}</td><td>{e(o.status)}</td><td>{when(o.due_ms)}</td>"
        f"<td>{when(o.warn_ms)}</td>"
        f"<td>{e(o.calendar)}</td><td>{e(o.on_breach or '—')}</td>"
        f"<td>{_run_link(o.sweep_run_id, href) if o.sweep_run_id else '—'}</td></tr>"
        for o in obligations
    )
    return (
        '<h3>Obligations</h3><table class="obligations"><thead><tr><th>Obligation</th>'
        "<th>Status</th><th>Due</th><th>Warn</th><th>Calendar</th><th>On breach</th>"
        f"<th>Breached by</th></tr></thead><tbody>{rows}</tbody></table>"
    )
