"""Serves the secret, only after a slow start: the agent can fetch it only if main waited."""

import os
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

time.sleep(1.5)


class Secret(BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ["SECRET"].encode() if self.path == "/secret.txt" else b"no"
        self.send_response(200 if self.path == "/secret.txt" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = HTTPServer(("0.0.0.0", 8000), Secret)
Path("/tmp/ready").touch()
server.serve_forever()
