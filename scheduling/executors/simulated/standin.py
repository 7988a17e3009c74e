"""A small real HTTP server standing in for a notebook server or an inference replica on the simulated cluster.

The simulated executor starts one per running notebook or replica (this file, run by its path),
so opening a notebook or calling a service works end to end in the demo and in tests, through the same proxy
and checks as on a real cluster. Standard library only: it must start in a blink and import nothing of the
portal.

- notebook: answers only requests carrying its token (``Authorization: token T``, as Jupyter takes it); a page
  at the base URL, ``api/status`` with Jupyter's ``last_activity`` and ``api/kernels`` (POST starts a
  "kernel", which counts as activity, as code run in a real kernel does).
- service: ``/healthz`` answers 503 until ``--ready-after`` seconds passed (a model loading), then 200;
  ``/v1/models`` names the image and revision; POST ``/v1/completions`` echoes the prompt. ``--crash-after``
  makes it exit with code 1 after that many seconds (a crash loop, once the executor restarts it).
- ports: a job's named ports (``--ports tensorboard:6006,ui:8080``), one listener each on a port of its own;
  ``tensorboard`` answers as TensorBoard's page and its ``data/runs`` list, any other name with a page that names
  the port. It writes ``{name: port}`` (JSON) to ``--port-file``.

It writes its port to ``--port-file`` once listening, and exits when its parent executor's record of it is
gone (``--pid-file`` removed) so nothing outlives a cleanup. With ``--parent PID`` it also ends with the process
that started it: when its standard input (a pipe only that process holds open) closes, which the kernel does the
moment that process ends however it ends, or, should the pipe be held open by a fork of it, when its parent is no
longer ``PID`` (it was re-parented). A demo, a worker or a test run that stops leaves no server behind.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Jupyter Server's own policy on its pages (no site but itself may frame them); the portal passes it on.
JUPYTER_POLICY = "frame-ancestors 'self'; report-uri {base_url}api/security/csp-report"


class _State:
    def __init__(self, args):
        self.args = args
        self.started = time.time()
        self.last_activity = time.time()
        self.kernels = 0


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def make_handler(state: _State):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        server_version = "gpuportal-standin/1"

        def log_message(self, format, *log_args):  # noqa: A002 - the base class's name
            pass  # the portal logs the proxied request; nobody reads this process's stderr

        def _send(self, status: int, body, content_type="application/json", policy=""):
            data = body if isinstance(body, bytes) else (
                json.dumps(body).encode() if content_type == "application/json" else body.encode())
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if policy:
                self.send_header("Content-Security-Policy", policy)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _path(self) -> str:
            path = self.path.split("?", 1)[0]
            base = args.base_url.rstrip("/")
            return path[len(base):] if base and path.startswith(base) else path

        def _authorised(self) -> bool:
            if args.mode != "notebook":
                return True
            return self.headers.get("Authorization", "") == f"token {args.token}"

        def do_GET(self):  # noqa: N802 - http.server's name
            path = self._path()
            if path == "/healthz":
                ready = time.time() - state.started >= args.ready_after
                return self._send(200 if ready else 503, {"ready": ready})
            if not self._authorised():
                return self._send(403, {"message": "Forbidden: a token is required"})
            if args.mode == "notebook":
                if path.startswith("/api/status"):
                    return self._send(200, {"started": _iso(state.started), "last_activity": _iso(state.last_activity),
                                            "connections": 0, "kernels": state.kernels})
                state.last_activity = time.time()
                # The image is the submitter's text: escaped, or a name like "<script>…" would run in the page.
                return self._send(200, (
                    "<!doctype html><html><head><title>Jupyter stand-in</title></head><body>"
                    f"<h1>Notebook of job {args.job}</h1><p id='standin'>Jupyter stand-in serving "
                    f"{html.escape(args.image)}; kernels: {state.kernels}</p></body></html>"),
                    "text/html; charset=utf-8", policy=JUPYTER_POLICY.format(base_url=args.base_url))
            if path.startswith("/v1/models"):
                return self._send(200, {"object": "list", "data": [{"id": args.image, "revision": args.revision,
                                                                    "replica": args.job}]})
            return self._send(200, {"service": args.image, "revision": args.revision, "replica": args.job})

        def do_POST(self):  # noqa: N802 - http.server's name
            length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
            body = self.rfile.read(length) if length else b""
            if not self._authorised():
                return self._send(403, {"message": "Forbidden: a token is required"})
            path = self._path()
            if args.mode == "notebook" and path.startswith("/api/kernels"):
                state.kernels += 1
                state.last_activity = time.time()
                return self._send(201, {"id": f"kernel-{state.kernels}", "execution_state": "idle"})
            if args.mode == "service" and path.startswith("/v1/completions"):
                try:
                    prompt = json.loads(body or b"{}").get("prompt", "")
                except ValueError:
                    return self._send(400, {"message": "body must be JSON"})
                return self._send(200, {"model": args.image, "revision": args.revision, "replica": args.job,
                                        "choices": [{"text": str(prompt)[::-1]}]})
            return self._send(404, {"message": "not found"})

    return Handler


def make_port_handler(args, name: str, declared: str):
    """What one named port of a job answers: TensorBoard's page and run list for ``tensorboard``, a page naming the
    port for any other (the job's own web UI)."""

    class PortHandler(BaseHTTPRequestHandler):
        server_version = "gpuportal-standin/1"

        def log_message(self, format, *log_args):  # noqa: A002 - the base class's name
            pass

        def _send(self, status: int, body: str, content_type: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if name == "tensorboard" and path.rstrip("/") == "/data/runs":
                return self._send(200, json.dumps(["train", "validation"]), "application/json")
            if path not in ("/", "/index.html"):
                return self._send(404, json.dumps({"message": "not found"}), "application/json")
            title = "TensorBoard" if name == "tensorboard" else html.escape(name)
            return self._send(200, (
                f"<!doctype html><html><head><title>{title} stand-in</title></head><body>"
                f"<h1>{title} of job {args.job}</h1><p id='standin'>Port {html.escape(name)} ({html.escape(declared)}) "
                f"of {html.escape(args.image)}</p><a href='data/runs'>runs</a></body></html>"),
                "text/html; charset=utf-8")

    return PortHandler


def _serve_ports(args) -> dict[str, int]:
    """One listener per named port, each on a port of its own; returns where each listens."""
    listening = {}
    for entry in filter(None, args.ports.split(",")):
        name, _colon, declared = entry.partition(":")
        server = ThreadingHTTPServer(("127.0.0.1", 0), make_port_handler(args, name, declared))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        listening[name] = server.server_address[1]
    return listening


def _orphaned(args) -> None:
    """Exit for good once the process that started this one is gone: the lease goes with it (the pid file, when it
    still names this process), so no later cleanup signals a pid the system may have given to someone else."""
    if args.pid_file:
        try:
            with open(args.pid_file) as handle:
                mine = handle.read().strip() == str(os.getpid())
        except OSError:
            mine = False
        if mine:
            with contextlib.suppress(OSError):
                os.unlink(args.pid_file)
    os._exit(0)


def _lifeline(args) -> None:
    """Block on standard input, a pipe whose only writer is the starting process: end of file means it ended."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(1024):
            pass
    _orphaned(args)


def _watch(args) -> None:
    """Exit on a crash-after deadline, once the pid file is gone (the executor stopped it, or cleaned up), or once
    the starting process is gone (this process was re-parented)."""
    started = time.time()
    while True:
        time.sleep(0.2)
        if args.crash_after and time.time() - started >= args.crash_after:
            sys.stderr.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
            sys.stderr.flush()
            os._exit(1)
        if args.pid_file and not os.path.exists(args.pid_file):
            os._exit(0)
        if args.parent and os.getppid() != args.parent:
            _orphaned(args)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("notebook", "service", "ports"), required=True)
    parser.add_argument("--ports", default="", help="ports mode: name:port entries, comma-separated")
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--token", default="")
    parser.add_argument("--image", default="")
    parser.add_argument("--revision", type=int, default=1)
    parser.add_argument("--base-url", default="/")
    parser.add_argument("--ready-after", type=float, default=0.0)
    parser.add_argument("--crash-after", type=float, default=0.0)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--pid-file", default="")
    parser.add_argument("--parent", type=int, default=0,
                        help="the starting process's pid: exit when it ends (standard input closes, or re-parented)")
    args = parser.parse_args(argv)
    if args.parent and os.getppid() != args.parent:
        _orphaned(args)  # it ended while this process started
    if args.parent:
        threading.Thread(target=_lifeline, args=(args,), daemon=True).start()
    if args.mode == "ports":
        listening = _serve_ports(args)
        with open(args.port_file + ".tmp", "w") as handle:
            handle.write(json.dumps(listening))
        os.replace(args.port_file + ".tmp", args.port_file)
        sys.stderr.write(f"[I {_iso(time.time())}] Serving the ports {args.ports} of job {args.job}\n")
        sys.stderr.flush()
        _watch(args)
        return
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(_State(args)))
    server.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as handle:
        handle.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    where = f"http://127.0.0.1:{server.server_address[1]}{args.base_url}"
    sys.stderr.write(f"[I {_iso(time.time())}] {'Jupyter stand-in' if args.mode == 'notebook' else 'Serving'} "
                     f"{args.image} (revision {args.revision}) at {where}\n")
    sys.stderr.flush()
    threading.Thread(target=_watch, args=(args,), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
