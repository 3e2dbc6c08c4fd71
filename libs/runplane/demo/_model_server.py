"""``python -m runplane.demo._model_server [--port N]``: the demo's model provider.

The OpenAI-compatible fake (``runplane.fakes.FakeOpenAIServer``) answering from the demo's own
model function, ``_support.demo_model``: the support conversation scripted turn by turn (and
obedient to an injected instruction), an echo for every other run.
"""

from __future__ import annotations

import argparse

from runplane.demo._support import demo_model
from runplane.fakes import FakeOpenAIServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m runplane.demo._model_server")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(model=demo_model, port=args.port)
    print(server.url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
