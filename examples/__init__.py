"""Runnable example agents. Importing ``examples.refund`` / ``examples.triage`` registers them
in ``runplane.core.REGISTRY`` (the executor imports ``RUNPLANE_AGENT_MODULES``)."""
