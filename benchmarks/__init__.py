"""Micro-benchmarks: each module exposes ``run(...) -> dict`` and prints its numbers."""
