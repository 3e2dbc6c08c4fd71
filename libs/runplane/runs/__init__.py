"""A run seen from Kafka, outside the executor: admitted, its records read back, orders sent to it.

Import the modules (nothing is re-exported here, so each name has one import path):

- ``runplane.runs.client``: the emitter client (``Client``): admit a run and get admission's
  answer, wait for its result, signal or cancel it.
- ``runplane.runs.read``: one run's journal records, result bodies, audit verdicts and case,
  read straight from the topics (``read_run`` → ``RunHistory``, ``read_audit``, ``read_case``).
- ``runplane.runs.repair``: an operator's repair orders (``send_order``) and forks
  (``write_fork``), and a run's latest snapshot (``read_snapshot``).
- ``runplane.runs.operate``: signalling or cancelling a run from outside (the client's, the
  CLI's and admission's HTTP endpoints' one set of rules: ``RunRefused``, ``Sent``, ``Target``).
"""
