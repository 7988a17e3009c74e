"""A misbehaving node agent for polling tests: it answers however the test likes."""

import socket
import threading


class RawAgent:
    """A fake agent that reads the request (kept in ``requests``), then answers with ``respond(sock)`` (drip,
    flood, ...)."""

    def __init__(self, respond, host="127.0.0.1", port=0):
        self.respond, self.accepted, self.requests = respond, threading.Event(), []
        self.listener = socket.create_server((host, port))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                sock, _address = self.listener.accept()
            except OSError:
                return
            self.accepted.set()
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _answer(self, sock):
        with sock:
            try:
                self.requests.append(sock.recv(65536))
                self.respond(sock)
            except OSError:  # the poller hung up: what a deadline is for
                pass

    def close(self):
        self.listener.close()
