"""Agent modules standing in for a new image's code in replay and gate tests."""
