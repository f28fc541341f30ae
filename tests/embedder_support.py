"""A real embedding service for the tests: `POST /v1/embeddings` on 127.0.0.1, as the common protocol has it.

Its toy model has one axis per idea (`IDEAS`); a text's vector counts its words of each, so a test
knows which record a query is nearest to."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

#: The toy model the test server runs: one axis per idea, a text's vector counts its words of each.
IDEAS = (("smoothing", "smoothed", "eps"), ("rotary", "rope", "theta"), ("dropout", "drop"))


def toy_vector(text: str) -> list[float]:
    words = text.lower().replace(",", " ").split()
    return [float(sum(w in idea for w in words)) + 0.01 for idea in IDEAS]


class Embeddings(BaseHTTPRequestHandler):
    """`POST /v1/embeddings` as the common protocol has it; records what it was asked."""

    asked: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Embeddings.asked.append({"path": self.path, **body})
        if self.path != "/v1/embeddings":
            self.send_error(404)
            return
        data = [{"object": "embedding", "index": i, "embedding": toy_vector(t)}
                for i, t in reversed(list(enumerate(body["input"])))]  # out of order: `index` says
        answer = json.dumps({"object": "list", "data": data, "model": body.get("model", "toy"),
                             "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Embeddings.asked = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
