"""Root test configuration: nothing heavy here (the unit suite must stay I/O-free and fast).

Tests are marked by where they live, so ``-m "not integration"`` is always the fast suite:
``tests/integration`` → ``integration``, ``tests/e2e`` → ``e2e`` (the stack fixtures are in
``tests/integration/conftest.py``).
"""

from __future__ import annotations

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
