"""How a failed outward call is classified: did it reach the peer?

That question, not "was it transient", decides whether a retry is safe::

    PeerCallError (RunplaneError)  reach + retryable + status + retry_after, typed fields
      reach = NOT_REACHED   provably never reached the peer (connection refused, connect
                            timeout, no pooled connection): safe to retry even a mutation
      reach = REJECTED      the peer answered and did not perform it (4xx, 429, 503)
      reach = IN_DOUBT      the request may have been performed (timeout or broken connection
                            after sending, 500/502/504): only a safe call may be retried
      ModelReplyError       a model answered 2xx but broke its turn's contract (tool arguments
                            that are not a JSON object, a call to a tool it was not offered):
                            IN_DOUBT and retryable, as a generation may be repeated

Retry decisions read these fields, never the message.
"""

from __future__ import annotations

from enum import StrEnum

import httpx

from runplane.errors import RunplaneError


class Reach(StrEnum):
    NOT_REACHED = "not_reached"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"


class PeerCallError(RunplaneError):
    """An outward call failed; ``reach`` says whether the peer may have acted on it."""

    def __init__(
        self,
        message: str,
        *,
        reach: Reach,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reach = reach
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


# Statuses that mean "understood, not performed, come back later".
_REJECTED_RETRYABLE = frozenset({408, 425, 429, 503})


def classify_transport(exc: httpx.TransportError) -> PeerCallError:
    """Classify an httpx transport failure by the phase it happened in."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        # No connection was ever established: not a byte of the request left this process.
        return PeerCallError(
            f"not reached: {type(exc).__name__}: {exc}", reach=Reach.NOT_REACHED, retryable=True
        )
    # Write/read timeouts, resets and protocol errors happen after sending began.
    return PeerCallError(
        f"in doubt: {type(exc).__name__}: {exc}", reach=Reach.IN_DOUBT, retryable=True
    )


def classify_status(response: httpx.Response) -> PeerCallError:
    """Classify a non-2xx answer; the peer did reply, so NOT_REACHED never applies."""
    status = response.status_code
    message = f"HTTP {status}: {_error_message(response)}"
    retry_after = _retry_after(response)
    if status in _REJECTED_RETRYABLE:
        return PeerCallError(
            message, reach=Reach.REJECTED, retryable=True, status=status, retry_after=retry_after
        )
    if status >= 500:
        return PeerCallError(message, reach=Reach.IN_DOUBT, retryable=True, status=status)
    return PeerCallError(message, reach=Reach.REJECTED, retryable=False, status=status)


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return response.text[:200]


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


class ModelReplyError(PeerCallError):
    """A model's reply broke the turn's contract: a tool call whose arguments are not a JSON
    object, or a call to a tool the turn did not offer. The generation was billed (in doubt)
    and may be repeated (retryable): another sample may well be valid."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reach=Reach.IN_DOUBT, retryable=True)
