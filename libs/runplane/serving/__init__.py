"""What a running service process is made of, below the Kafka loop and above the pure core.

Import the modules (nothing is re-exported here, so each name has one import path — and
``runplane.kafka``, which takes a probe and trace headers from here, pulls no Starlette,
uvicorn or redis in through this package):

- ``runplane.serving.auth``: principals and bearer tokens, tenants (who is acting, from the
  credential).
- ``runplane.serving.watched``: configuration files re-read when they change (principals,
  emitters' keys).
- ``runplane.serving.health``: a ``Probe`` per poll loop and a ``Health`` per service (standard
  library only).
- ``runplane.serving.shell``: the service shell — probes and metrics over HTTP, structured
  logs, backend errors as 503s, ``run_http``.
- ``runplane.serving.tracing``: OpenTelemetry traces, W3C trace context in record headers.
- ``runplane.serving.shutdown``: SIGTERM/SIGINT as a stop event, with a bound on the exit.
"""
