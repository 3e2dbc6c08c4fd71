"""``python -m runplane.fakes billing|openai|anthropic [--port N] [--counts FILE] [--charge-delay S]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from runplane.fakes._anthropic import FakeAnthropicServer
from runplane.fakes._billing import FakeBillingServer
from runplane.fakes._openai import FakeOpenAIServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m runplane.fakes")
    parser.add_argument("which", choices=["billing", "openai", "anthropic"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--counts", type=Path, default=None)
    parser.add_argument("--charge-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.which == "billing":
        billing = FakeBillingServer(
            counts_path=args.counts, charge_delay_s=args.charge_delay, port=args.port
        )
        print(billing.url, flush=True)
        billing.serve_forever()
    else:
        model = (
            FakeOpenAIServer(port=args.port)
            if args.which == "openai"
            else FakeAnthropicServer(port=args.port)
        )
        print(model.url, flush=True)
        model.serve_forever()


if __name__ == "__main__":
    main()
