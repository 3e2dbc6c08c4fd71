"""Golden journals in a project's own tests: ``assert_replays`` (also at the package's front
door, ``runplane.testing``) replays recorded runs against the agent code importable now.

    from runplane.testing import assert_replays

    def test_recorded_runs_still_replay():
        assert_replays(Path(__file__).parent / "golden")   # files from `runplane journal export`
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from runplane.core import REGISTRY, AgentRegistry
from runplane.core.engine import RunReplay, replay_with
from runplane.core.recording import Recording, load_recordings

__all__ = ["assert_replays"]


def assert_replays(
    source: str | Path | Iterable[Recording], agents: AgentRegistry | None = None
) -> list[RunReplay]:
    """Replay golden journals (an export file, a recorded run's JSON, a folder of them, or
    ``Recording``s) against the agent code importable now; fail the test with each divergence
    (position and recorded vs new request as a diff). ``agents`` defaults to ``REGISTRY``.

        def test_deployed_runs_still_replay():
            assert_replays(Path(__file__).parent / "golden")
    """
    registry = REGISTRY if agents is None else agents
    if isinstance(source, str | Path):
        path = Path(source)
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        source = [r for f in files for r in load_recordings(f.read_text(encoding="utf-8"))]
    reports = [replay_with(registry, r) for r in source]
    if not reports:
        raise AssertionError(f"no recorded runs to replay in {source!r}")
    bad = [r.explain() for r in reports if not r.ok]
    if bad:
        raise AssertionError("recorded runs do not replay:\n" + "\n".join(bad))
    return reports
