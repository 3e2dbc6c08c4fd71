"""Helpers shared by the test suites and the benchmarks, never by the library or a service.

- ``waiting``: ``wait_for``, the one way a test waits for something to become true.
- ``harness``: admit runs as admission does, run an executor in a thread, read tables and
  topics back (integration tests, e2e tests, benchmarks).
- ``sample``: a sealed sample run built with the core's chain functions.

Importable as ``tests.helpers`` from the repository root: pytest puts it on the path
(``pythonpath = ["."]``) and ``python -m benchmarks.X`` / ``python -m tests.chaos.chaos`` run
from there. ``tests`` has no ``__init__.py`` (pytest imports the test modules by their base
name), so it is a namespace package. Nothing is re-exported here: each name has one import
path, its module's.
"""
