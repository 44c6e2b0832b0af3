"""Keeps text by path (PUT stores the body, GET returns it), after a slow start: the agent can
store anything only if the client waited for it to be healthy."""

import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

time.sleep(1.5)
kept: dict[str, bytes] = {}


class Store(BaseHTTPRequestHandler):
    def do_PUT(self):
        kept[self.path] = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(204, b"")

    def do_GET(self):
        body = kept.get(self.path)
        self.answer(404, b"") if body is None else self.answer(200, body)

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = HTTPServer(("0.0.0.0", 8000), Store)
Path("/tmp/ready").touch()
server.serve_forever()
