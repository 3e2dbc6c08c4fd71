"""The run page's waterfall: a run's steps on its own time axis (``runplane.journal.waterfall``).

One row per step — an effect call, a wait for a person, a park — with its label as text (the
call's family and name, or who the run waits for, and how long it took) and its bar as a small
inline SVG placed on the run's axis. No script and no asset: the CSP forbids ``style``
attributes, so bars are positioned by SVG attributes and coloured by classes in
``journal.css`` — a failed call red, a wait for a person amber, a park grey, what is still open
striped. Every row links to the timeline record that began it (``#seq-N``) and carries its
numbers as ``data-*`` attributes (a test reads them).
"""

from __future__ import annotations

from collections.abc import Mapping

from runplane.journal.waterfall import Bar, BarKind, BarState, Waterfall
from runplane.web import e
from services.journal.ui_overview import duration_text

__all__ = ["bar_label", "waterfall_section"]

_TRACK = 1000  # the track's viewBox width: bars are placed in thousandths of the run's span
_MIN_BAR = 4  # an instant still shows as a mark

_STATE_NOTE: Mapping[BarState, str] = {
    BarState.OK: "",
    BarState.FAILED: "failed",
    BarState.IN_DOUBT: "in doubt",
    BarState.OPEN: "still open",
    BarState.UNFINISHED: "left open when the run ended",
}


def bar_label(bar: Bar) -> str:
    """What a person reads for a step (plain text)."""
    if bar.kind is BarKind.PERSON:
        roles = ", ".join(bar.roles)
        return "waiting for a person" + (f": role {roles}" if roles else "")
    if bar.kind is BarKind.PARKED:
        kind, _, ref = bar.waits_for.partition(":")
        if kind == "signal":
            return f"waiting for signal {ref}"
        if kind == "version":
            return f"parked: version {ref} not deployed"
        if kind == "doubt":  # a call in doubt waits out its deadline before its probe asks
            return "in doubt: waiting out the call's deadline"
        return f"parked on {bar.waits_for or 'something unnamed'}"
    return " ".join(x for x in (bar.family, bar.name) if x) or "call"


def _note(bar: Bar, errors: Mapping[tuple[int, int], str]) -> str:
    parts = []
    if bar.outcome:
        parts.append(bar.outcome)
    if note := _STATE_NOTE[bar.state]:
        if bar.kind is not BarKind.CALL and bar.state is BarState.OPEN:
            note = "still waiting"
        parts.append(note)
    if bar.was_in_doubt:
        parts.append("was in doubt, settled by an operator")
    if bar.call_seq is not None and (error := errors.get((bar.era, bar.call_seq))):
        parts.append(error)
    return " · ".join(parts)


def _row(bar: Bar, span: int, errors: Mapping[tuple[int, int], str]) -> str:
    scale = _TRACK / span if span > 0 else 0.0
    x = min(bar.start_ms * scale, _TRACK - _MIN_BAR)
    width = max(bar.duration_ms * scale, _MIN_BAR)
    label = bar_label(bar)
    took = duration_text(bar.duration_ms)
    head = (
        f'<span class="wf-name">{e(label)}</span>'
        if bar.kind is not BarKind.CALL
        else f'<span class="wf-name">{e(bar.family)} <code>{e(bar.name)}</code></span>'
    )
    note = _note(bar, errors)
    slot = "" if bar.call_seq is None else f" call {bar.call_seq}"
    title = f"{label}: {took}" + (f", {note}" if note else "")
    return (
        f'<li class="wf-row wf-{bar.kind} wf-{bar.state}" data-kind="{bar.kind}" '
        f'data-state="{bar.state}" data-start-ms="{bar.start_ms}" '
        f'data-duration-ms="{bar.duration_ms}" data-seq="{bar.seq}">'
        f'<div class="wf-label">{head} <span class="wf-took">{e(took)}</span>'
        + (f' <span class="wf-note">{e(note)}</span>' if note else "")
        + f' <a class="wf-at muted" href="#seq-{bar.seq}">#{bar.seq} · era {bar.era}{slot}'
        f" · at +{e(duration_text(bar.start_ms))}</a></div>"
        f'<svg class="wf-track" viewBox="0 0 {_TRACK} 12" preserveAspectRatio="none" '
        f'role="img" aria-label="{e(title)}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect class="wf-bar" x="{x:.1f}" y="1" width="{width:.1f}" height="10">'
        f"<title>{e(title)}</title></rect></svg></li>"
    )


def waterfall_section(wf: Waterfall, errors: Mapping[tuple[int, int], str] | None = None) -> str:
    """The run page's waterfall card; ``errors``: what each failed call failed with, by slot
    (bodies: given for a reader of bodies only)."""
    if not wf.bars:
        body = '<p class="note">No calls and no waits recorded yet.</p>'
    else:
        rows = "".join(_row(b, wf.span_ms, errors or {}) for b in wf.bars)
        failed = sum(1 for b in wf.bars if b.state is BarState.FAILED)
        people = [b for b in wf.bars if b.kind is BarKind.PERSON]
        waited = sum(b.duration_ms for b in people)
        summary = (
            f"{len(wf.bars)} steps over {duration_text(wf.span_ms)}"
            + ("" if wf.ended else " so far")
            + (f" · {failed} failed" if failed else "")
            + (f" · {duration_text(waited)} waiting for people" if people else "")
        )
        body = (
            f'<p class="muted wf-summary">{e(summary)}</p>'
            f'<div class="wf-axis" aria-hidden="true"><span>0</span>'
            f"<span>{e(duration_text(wf.span_ms // 2))}</span>"
            f"<span>{e(duration_text(wf.span_ms))}</span></div>"
            f'<ol class="waterfall">{rows}</ol>'
            '<ul class="legend"><li><span class="swatch wf-key-ok"></span>call</li>'
            '<li><span class="swatch wf-key-failed"></span>failed</li>'
            '<li><span class="swatch wf-key-person"></span>waiting for a person</li>'
            '<li><span class="swatch wf-key-parked"></span>parked</li>'
            '<li><span class="swatch wf-key-doubt"></span>in doubt</li></ul>'
        )
    return (
        '<section class="card waterfall-card" id="waterfall" aria-label="Waterfall">'
        '<h2>Steps <span class="muted">(the run\'s calls and waits on its time axis, '
        "from the journal's stamps)</span></h2>"
        f"{body}</section>"
    )
