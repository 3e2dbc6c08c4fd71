"""Root test configuration: nothing heavy here (the unit suite must stay I/O-free and fast).

Tests are marked by where they live, so ``-m "not integration"`` is always the fast suite:
``tests/integration`` → ``integration``, ``tests/e2e`` → ``e2e`` (the stack fixtures are in
``tests/integration/conftest.py``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).parent
_DIRECTORY_MARKS = {"integration": "integration", "e2e": "e2e", "unit": "unit"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = item.path.relative_to(_TESTS).parts[0]
        except ValueError:
            continue
        mark = _DIRECTORY_MARKS.get(top)
        if mark is not None and item.get_closest_marker(mark) is None:
            item.add_marker(mark)


@pytest.fixture
def reachable_kafka(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local port that accepts TCP connections, set as RUNPLANE_BOOTSTRAP_SERVERS: for CLI
    tests whose Kafka clients are faked, so the CLI's reach check (a real connect, made before
    any client) passes whether or not a broker runs on this machine. Nothing answers on it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
        monkeypatch.setenv("RUNPLANE_BOOTSTRAP_SERVERS", address)
        yield address
