"""The runs UI's pure pieces: which facts link to other runs, the time filters, escaping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runplane.core.chain import Draft, seal
from runplane.web import e
from runplane.wire import JournalKind
from services.journal.ui import _linked_runs, _local_from_ms, _ms_from_local, run_href


def _record(seq: int, attrs: dict[str, str]):  # type: ignore[no-untyped-def]
    return seal(Draft("r-1", seq, 0, JournalKind.RUN_ADMITTED, 1_000, attrs=attrs), "0" * 64)


def test_facts_naming_runs_become_links_once_each() -> None:
    records = [
        _record(0, {"parent_run": "r-p", "capability": "x"}),
        _record(1, {"child_run": "r-c", "parent_run": "r-p"}),
    ]
    assert _linked_runs(records) == [("parent_run", "r-p"), ("child_run", "r-c")]


@given(st.integers(min_value=0, max_value=4_000_000_000_000))
def test_the_time_filter_round_trips_to_the_minute(ms: int) -> None:
    back = _ms_from_local(_local_from_ms(ms))
    assert back is not None and 0 <= ms - back < 60_000


def test_a_malformed_time_filter_is_ignored() -> None:
    assert _ms_from_local("yesterday") is None and _ms_from_local("") is None


@given(st.text())
def test_run_links_cannot_break_out_of_their_attribute(run_id: str) -> None:
    href = e(run_href(run_id))
    assert '"' not in href and "<" not in href and href.startswith("/ui/runs/")


def test_a_run_parked_on_its_version_says_so_plainly() -> None:
    from services.journal.ui import _waiting_on

    assert "version 1 not deployed" in _waiting_on("version:1")
    assert _waiting_on("signal:go") == "signal:go" and _waiting_on(None) == "—"
    assert "<b>" not in _waiting_on("version:<b>1")  # escaped, like every other fact


def test_the_case_card_shows_its_state_to_auditors_only() -> None:
    from runplane.wire import CaseRecord
    from services.journal.ui_case import case_section

    case = CaseRecord(case_id="c-1", version=2, state_json='{"secret": "s3"}', updated_ms=1)
    clerk = case_section("c-1", case, show_state=False, href=run_href)
    auditor = case_section("c-1", case, show_state=True, href=run_href)
    assert "s3" not in clerk and "auditors only" in clerk
    assert "&quot;secret&quot;: &quot;s3&quot;" in auditor
    assert case_section(None, None, show_state=True, href=run_href) == ""
    assert "no record of this case" in case_section("c-2", None, show_state=True, href=run_href)


def test_parent_and_children_come_from_the_commission_links() -> None:
    from services.journal.ui_case import related_section

    records = [
        _record(0, {"parent_run": "r-p"}),
        seal(
            Draft(
                "r-1",
                1,
                0,
                JournalKind.EFFECT_RECORDED,
                1,
                call_seq=0,
                family="commission",
                attrs={"child_run": "r-c", "node": "n1"},
            ),
            "0" * 64,
        ),
        _record(2, {"forked_from_run": "r-old"}),
    ]
    html = related_section(records, _linked_runs(records), run_href)
    parent, children, others = html.split("<dt>")[1:]
    assert "r-p" in parent and "r-c" in children and "node n1" in children
    assert "r-old" in others and "r-p" not in others and "r-c" not in others
