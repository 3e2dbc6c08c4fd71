"""Model providers and HTTP tools: the executor's outward calls.

* :class:`OpenAIProvider` — an OpenAI-compatible chat-completions provider (httpx).
* :class:`FunctionTool` — a registered Python callable as a tool.
* :class:`HttpTool` — a tool that is one HTTP request; :func:`billing_tools` for the refund
  example.
* :class:`PeerCallError` / :class:`Reach` — the "did it reach the peer?" classification the
  live-call runner retries by.

Each call is one attempt; timeouts, retries and concurrency bounds are the executor's.
"""

from __future__ import annotations

from runplane.providers._errors import PeerCallError, Reach, classify_status, classify_transport
from runplane.providers._function_tool import FunctionTool
from runplane.providers._http_tool import HttpTool, billing_tools
from runplane.providers._openai import Completion, OpenAIProvider

__all__ = [
    "Completion",
    "FunctionTool",
    "HttpTool",
    "OpenAIProvider",
    "PeerCallError",
    "Reach",
    "billing_tools",
    "classify_status",
    "classify_transport",
]
