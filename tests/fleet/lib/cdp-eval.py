#!/usr/bin/env python3
"""Evaluate JavaScript in a page loaded by headless Chromium.

cdp-eval.py WIDTH HEIGHT URL READY EXPR CHROMIUM [CHROMIUM ARGS...]

Chromium runs with --remote-debugging-pipe (the DevTools protocol over
fds 3 and 4, no port): one tab of WIDTH x HEIGHT CSS pixels (a phone's
viewport when WIDTH is small: the page's <meta name=viewport> applies)
loads URL; the JavaScript expression READY is evaluated every 0.2 s until
it is true (60 s at most, exit 1 otherwise), then EXPR, whose value is
printed as JSON. Exit 2 on a protocol error. For the fleet tests (no
package beyond Python's standard library).
"""
import fcntl
import json
import os
import subprocess
import sys
import time


def main():
    width, height, url, ready, expr = sys.argv[1:6]
    chrome = sys.argv[6:]
    # Chromium reads commands from fd 3 and writes answers to fd 4. The
    # pipes' ends move above 10 (close-on-exec) first, clear of 3 and 4;
    # the child's dup2 onto 3 and 4 leaves only those two open across exec.
    ends = []
    for fd in os.pipe() + os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    to_chrome_r, to_chrome_w, from_chrome_r, from_chrome_w = ends

    def child_fds():
        os.dup2(to_chrome_r, 3)
        os.dup2(from_chrome_w, 4)

    proc = subprocess.Popen(
        chrome + ["--remote-debugging-pipe", "about:blank"],
        preexec_fn=child_fds, close_fds=False,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    out = os.fdopen(to_chrome_w, "wb")
    inp = os.fdopen(from_chrome_r, "rb")
    pending = b""
    next_id = [0]

    def call(method, params=None, session=None):
        nonlocal pending
        next_id[0] += 1
        msg = {"id": next_id[0], "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        out.write(json.dumps(msg).encode() + b"\0")
        out.flush()
        while True:
            while b"\0" not in pending:
                chunk = inp.read1(65536)
                if not chunk:
                    raise RuntimeError("Chromium closed the pipe")
                pending += chunk
            raw, pending = pending.split(b"\0", 1)
            ans = json.loads(raw)
            if ans.get("id") == next_id[0]:
                if "error" in ans:
                    raise RuntimeError(method + ": " + json.dumps(ans["error"]))
                return ans["result"]

    def evaluate(session, e):
        r = call("Runtime.evaluate", {"expression": e, "returnByValue": True},
                 session)
        if "exceptionDetails" in r:
            raise RuntimeError(e + ": " + json.dumps(r["exceptionDetails"]))
        return r["result"].get("value")

    try:
        target = call("Target.createTarget", {"url": "about:blank"})
        session = call("Target.attachToTarget",
                       {"targetId": target["targetId"], "flatten": True})
        session = session["sessionId"]
        call("Emulation.setDeviceMetricsOverride",
             {"width": int(width), "height": int(height),
              "deviceScaleFactor": 1, "mobile": int(width) < 600}, session)
        call("Page.navigate", {"url": url}, session)
        end = time.monotonic() + 60
        while not evaluate(session, ready):
            if time.monotonic() > end:
                print("not ready: " + ready, file=sys.stderr)
                return 1
            time.sleep(0.2)
        print(json.dumps(evaluate(session, expr)))
        return 0
    except (RuntimeError, ValueError, KeyError) as e:
        print("cdp-eval: %s" % e, file=sys.stderr)
        return 2
    finally:
        try:
            call("Browser.close")
        except (RuntimeError, ValueError, OSError):
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
