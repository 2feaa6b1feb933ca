#!/usr/bin/env python3
"""A webhook receiver for the notification tests (tests/e2e/notify.sh).

hookrecv.py --port-file F --log F [--cert C --key K] [--fail-first K]
            [--hang PATH] [--slow PATH] [--feishu-secret S]
            [--dingtalk-secret S]

Listens on 127.0.0.1 (an ephemeral port, written to --port-file once it
listens), over HTTPS with --cert/--key. Every request is one JSON line in
--log: {"time", "path", "query", "headers", "body", "status", "sig"}.
The first K requests (--fail-first) get a 500. A request whose path starts
with --hang is accepted and never answered; one whose path starts with
--slow is logged when it arrives ("status": "arrived") and answered 200
two seconds later. Feishu (path /feishu...) and
DingTalk (/dingtalk...) signatures are checked here with the platforms'
documented algorithms, independently of gpufleet: "sig" is "ok", "bad"
or "none"; a bad one gets the platform's error body.
"""

import argparse
import base64
import hashlib
import hmac
import json
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = None
lock = threading.Lock()
count = [0]


def feishu_ok(body, secret):
    # sign = base64(HMAC-SHA256(key = timestamp + "\n" + secret, msg = ""))
    ts = body.get("timestamp")
    sign = body.get("sign")
    if ts is None or sign is None:
        return "none"
    key = ("%s\n%s" % (ts, secret)).encode()
    want = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest())
    fresh = abs(time.time() - int(ts)) < 3600
    return "ok" if want.decode() == sign and fresh else "bad"


def dingtalk_ok(query, secret):
    # sign = urlencode(base64(HMAC-SHA256(key = secret,
    #                                     msg = timestamp + "\n" + secret)))
    q = urllib.parse.parse_qs(query)
    if "timestamp" not in q or "sign" not in q:
        return "none"
    ts = q["timestamp"][0]
    msg = ("%s\n%s" % (ts, secret)).encode()
    want = base64.b64encode(
        hmac.new(secret.encode(), msg, hashlib.sha256).digest()).decode()
    fresh = abs(time.time() * 1000 - int(ts)) < 3600 * 1000
    return "ok" if want == q["sign"][0] and fresh else "bad"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        u = urllib.parse.urlsplit(self.path)
        rec = {"time": time.time(), "path": u.path, "query": u.query,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": raw.decode("utf-8", "replace"), "sig": "none"}
        if args.hang and u.path.startswith(args.hang):
            rec["status"] = "hung"
            self.record(rec)
            time.sleep(3600)
            return
        if args.slow and u.path.startswith(args.slow):
            self.record(dict(rec, status="arrived"))
            time.sleep(2)
        with lock:
            count[0] += 1
            k = count[0]
        status, answer = 200, b"ok"
        if u.path.startswith("/feishu"):
            answer = b'{"code":0,"msg":"success"}'
            if args.feishu_secret:
                try:
                    rec["sig"] = feishu_ok(json.loads(raw),
                                           args.feishu_secret)
                except ValueError:
                    rec["sig"] = "bad"
                if rec["sig"] != "ok":
                    answer = b'{"code":19021,"msg":"sign match fail"}'
        elif u.path.startswith("/dingtalk"):
            answer = b'{"errcode":0,"errmsg":"ok"}'
            if args.dingtalk_secret:
                rec["sig"] = dingtalk_ok(u.query, args.dingtalk_secret)
                if rec["sig"] != "ok":
                    answer = b'{"errcode":310000,"errmsg":"sign not match"}'
        if k <= args.fail_first:
            status, answer = 500, b"try later"
        rec["status"] = status
        self.record(rec)
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def record(self, rec):
        with lock:
            with open(args.log, "a") as f:
                f.write(json.dumps(rec) + "\n")


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--hang")
    p.add_argument("--slow")
    p.add_argument("--feishu-secret")
    p.add_argument("--dingtalk-secret")
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
