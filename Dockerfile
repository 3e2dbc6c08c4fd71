# syntax=docker/dockerfile:1
#
# One image for every runplane service. The service is the argument:
#
#   docker run runplane/runplane:0.1.0 serve executor      # one service
#   docker run runplane/runplane:0.1.0                     # all six in one process
#   docker run runplane/runplane:0.1.0 topics create       # create the topics (idempotent)
#
# Configuration is RUNPLANE_* environment only (see libs/runplane/config.py). docker-compose.yml
# and helm/runplane use this image; tests/unit/test_deploy_consistency.py keeps them in step.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: resolve and build every wheel once --------------------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# Metadata first so the dependency layer is cached across source edits.
COPY pyproject.toml README.md* ./
COPY libs ./libs
COPY services ./services
RUN pip wheel --wheel-dir /wheels .

# ---- runtime: slim, non-root, no compiler, no pip cache -------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG RUNPLANE_UID=10001
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    RUNPLANE_HTTP_HOST=0.0.0.0 \
    RUNPLANE_STATE_DIR=/var/lib/runplane \
    PYTHONPATH=/app
RUN groupadd --system --gid "${RUNPLANE_UID}" runplane \
 && useradd --system --uid "${RUNPLANE_UID}" --gid runplane --home-dir /app --shell /usr/sbin/nologin runplane \
 && mkdir -p /app /var/lib/runplane /etc/runplane \
 && chown runplane:runplane /var/lib/runplane
# Every version is fixed by the builder's wheels (--no-index): nothing is resolved here.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels runplane
WORKDIR /app
# The example agents (the default RUNPLANE_AGENT_MODULES of admission and the executor:
# examples.refund, examples.triage, examples.declarative) and calendars, importable through PYTHONPATH=/app; the Avro schemas for
# reference (the wire types are generated into the package). Your own agents: build FROM this
# image, COPY them under /app and set RUNPLANE_AGENT_MODULES.
COPY --chown=root:root schemas ./schemas
COPY --chown=root:root examples ./examples
USER ${RUNPLANE_UID}:${RUNPLANE_UID}
# admission 8301, executor 8302, cases 8303, sweeper 8304, worklist 8305, journal 8306
EXPOSE 8301 8302 8303 8304 8305 8306 8307
ENTRYPOINT ["runplane"]
CMD ["serve", "all"]
