#!/usr/bin/env python3
"""A tiny HTTP server that replays canned OpenAI-style replies, for testing the URL route.

    fixture_server.py SCENARIO.json [--port N] [--port-file F] [--log F]

It listens on 127.0.0.1 (port N, or a free one written to F once it listens) and answers
from the scenario, a JSON object:

    "start_delay": S        sleep S seconds before listening (a server that is slow to come up)
    "health": [R, ...]      replies to GET /health, one per probe, the last one repeated;
                            absent: 404 (no such route)
    "v1_health": [R, ...]   the same for GET /v1/health
    "models": R             the reply to GET /v1/models (absent: 404)
    "close_first": N        close the connection without a reply for the first N POSTs
    "completions": [        POST /v1/chat/completions and /v1/completions
        {"path": "/v1/chat/completions", "match": "TEXT",
         "replies": [R, ...]}         the first entry whose path is the request's and whose
    ]                                 match occurs in the prompt (a string, or the JSON of a
                                      token array) or in the last message's content answers;
                                      its replies are used in turn, cycling

where R is {"status": 200, "body": {...} or "text", "delay": seconds}, or {"raw": "TEXT"}: the
whole reply as it goes on the wire (status line, headers, body: each character U+0000..U+00FF
one byte, so replies cut short, binary bodies and ill-formed UTF-8 can be written), after
which the connection is closed. Every request is
appended to the log as one JSON line {"method", "path", "body"}; SIGTERM stops the server.
"""
import argparse
import json
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, scenario, log):
        self.s = scenario
        self.log = open(log, "a") if log else None
        self.lock = threading.Lock()
        self.count = {}
        self.closed = 0

    def next(self, key, seq):
        with self.lock:
            i = self.count.get(key, 0)
            self.count[key] = i + 1
        return seq[min(i, len(seq) - 1)] if key.startswith("health") else seq[i % len(seq)]

    def record(self, method, path, body):
        if not self.log:
            return
        with self.lock:
            self.log.write(json.dumps({"method": method, "path": path, "body": body}) + "\n")
            self.log.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, fmt, *args):
        pass

    def reply(self, r):
        if r.get("delay"):
            time.sleep(r["delay"])
        if "raw" in r:
            self.wfile.write(r["raw"].encode("latin-1"))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        body = r.get("body", {})
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(r.get("status", 200))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self):
        self.reply({"status": 404, "body": {"error": {"code": 404, "message": "File Not Found",
                                                      "type": "not_found_error"}}})

    def do_GET(self):
        st = self.state
        st.record("GET", self.path, None)
        key = {"/health": "health", "/v1/health": "v1_health"}.get(self.path)
        if key and key in st.s:
            return self.reply(st.next(key, st.s[key]))
        if self.path == "/v1/models" and "models" in st.s:
            return self.reply(st.s["models"])
        return self.not_found()

    def do_POST(self):
        st = self.state
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        st.record("POST", self.path, body)
        with st.lock:
            close = st.closed < st.s.get("close_first", 0)
            st.closed += close
        if close:
            # no reply at all: the client sees the connection closed before a byte came back
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        text = ""
        if isinstance(body, dict):
            if isinstance(body.get("prompt"), str):
                text = body["prompt"]
            elif "prompt" in body:
                text = json.dumps(body["prompt"])
            elif body.get("messages"):
                text = str(body["messages"][-1].get("content", ""))
        for i, c in enumerate(st.s.get("completions", [])):
            if c.get("path", self.path) == self.path and c.get("match", "") in text:
                return self.reply(st.next("c%d" % i, c["replies"]))
        return self.reply({"status": 400, "body": {"error": {"code": 400, "type":
                                                             "invalid_request_error",
                                                             "message": "no fixture matches"}}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    a = ap.parse_args()
    with open(a.scenario) as f:
        scenario = json.load(f)
    Handler.state = State(scenario, a.log)
    time.sleep(scenario.get("start_delay", 0))
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % srv.server_address[1])
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
