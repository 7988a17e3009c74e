"""``python -m kubefake --nodes 1000 --node-prefix bench-``: serve the fake API server and print its URL.

For benchmarks that want the API server in its own process (its own interpreter lock), as a real one is.
"""

import argparse
import contextlib
import signal
import sys
import threading

from .server import FakeKubernetes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kubefake", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--node-prefix", default="node-")
    parser.add_argument("--no-validate", action="store_true", help="Skip schema validation (not for tests).")
    args = parser.parse_args(argv)
    fake = FakeKubernetes(nodes=[f"{args.node_prefix}{i:04d}" for i in range(args.nodes)],
                          validate=not args.no_validate)
    url = fake.start(args.host, args.port)
    print(url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_a: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
