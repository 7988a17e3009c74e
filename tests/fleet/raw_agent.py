"""A misbehaving node agent for polling tests: it answers however the test likes."""

import socket
import threading


class RawAgent:
    """A fake agent that reads the request, then answers with ``respond(sock)`` (drip, flood, ...)."""

    def __init__(self, respond):
        self.respond, self.accepted = respond, threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
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
                sock.recv(65536)
                self.respond(sock)
            except OSError:  # the poller hung up: what a deadline is for
                pass

    def close(self):
        self.listener.close()
