#!/usr/bin/env python3
"""An inventory system's receiver for tests/sink_http.rs: an HTTP (or,
with --cert/--key, HTTPS) server on 127.0.0.1:PORT that logs every POST
and answers as the control file says.

Control file (JSON, read again at each request, written atomically by the
test): {"gen": N, "script": [{"status": 500, "delay_s": 0}, ...],
"default": {"status": 200, "delay_s": 0}, "max_entries": M}. The i-th
request since "gen" last changed gets script[i], later ones "default";
with "max_entries", a request of more entries (X-Scangate-Entries) gets
413 whatever its turn (a receiver's size limit).

Log (JSON lines, one per request, flushed before the answer is sent):
{"n", "t", "path", "key", "content_type", "authorization", "entries",
"seq", "body", "status"}: when it came (Unix s), the body as text, and the
status answered.
"""
import argparse
import http.server
import json
import ssl
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--control", required=True)
p.add_argument("--log", required=True)
p.add_argument("--cert")
p.add_argument("--key")
args = p.parse_args()

state = {"gen": None, "n": 0, "total": 0}


def control():
    try:
        with open(args.control) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"gen": 0, "script": [], "default": {"status": 200}}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        c = control()
        if c.get("gen") != state["gen"]:
            state["gen"], state["n"] = c.get("gen"), 0
        script = c.get("script", [])
        answer = script[state["n"]] if state["n"] < len(script) else c.get("default", {"status": 200})
        state["n"] += 1
        state["total"] += 1
        status = answer.get("status", 200)
        limit = c.get("max_entries")
        if limit is not None and int(self.headers.get("X-Scangate-Entries", "0")) > limit:
            answer, status = {"body": f"at most {limit} entries per request"}, 413
        record = {
            "n": state["total"],
            "t": time.time(),
            "path": self.path,
            "key": self.headers.get("Idempotency-Key"),
            "content_type": self.headers.get("Content-Type"),
            "authorization": self.headers.get("Authorization"),
            "entries": self.headers.get("X-Scangate-Entries"),
            "seq": self.headers.get("X-Scangate-Seq"),
            "body": body.decode("utf-8", "replace"),
            "status": status,
            "delay_s": answer.get("delay_s", 0),
        }
        with open(args.log, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
        if answer.get("delay_s"):
            time.sleep(answer["delay_s"])
        reply = answer.get("body", "ok").encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(reply)))
            if "retry_after" in answer:
                self.send_header("Retry-After", str(answer["retry_after"]))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


server = Server(("127.0.0.1", args.port), Handler)
if args.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
sys.stdout.close()
server.serve_forever()
