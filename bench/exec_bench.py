#!/usr/bin/env python3
"""Measure `gpufleet exec` against pdsh, clush and parallel-ssh on one
sandbox fleet.  Driven by bench/exec.sh, which installs the tools, builds
gpufleet, starts and stops the fleet; this file only runs and measures.

  exec_bench.py run --fleet DIR --n N --gpufleet BIN --work DIR
                    --reps R --slow-reps S --timeout SECS --results FILE
                    [--ssh-config FILE] [--rtt MS] [--window-off-config INI]
                    [--ansible-max-n N]

Every run is one command line under /usr/bin/time, started in its own
session (so a run that hangs can be killed with all its children) with
stdout and stderr going to files.  A run counts only if it is verified:

  * every host ran the command: exit status 0 (pdsh and clush with -S, so
    that they return the largest remote status; 255 when ssh failed),
    parallel-ssh's "[SUCCESS]" line for each host, gpufleet's summary
    "N hosts: N ok"; `gpufleet status` (the agent deployed in the warm-up)
    exit 0 and a row "NAME  up" for each of the N hosts;
  * for `seq 100`, each of the N hosts printed exactly 1..100, in order;
  * the sshd logs gained exactly N "Accepted publickey" lines (N fresh
    logins, as the fleet user, with the fleet key).

A failed run is reported as failed (with the reason) and left out of the
medians.  Measured per run: wall time, user+sys CPU of the tool and its
children (from /usr/bin/time, i.e. wait4 rusage), the largest RSS of any
single process of the run (%M), the summed RSS of the tool and all its
descendants (sampled every 100 ms), and the CPU the fleet's sshd
processes spent (cutime+cstime of the sshd listeners, read once every
connection of the run has ended; bench/exec.sh runs them as child
subreapers, so this includes the post-auth session processes sshd's
monitors orphan, which pid 1 would reap otherwise).
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
KEX = "curve25519-sha256"
SAMPLE_S = 0.1
ANSIBLE_MAX_N = 50
SLOW_SEQ_MAX_N = 200  # above: the slow rows run only `true`
WINDOW_NOISE = 1.1  # run-to-run spread of one row on this 2-core machine


# --------------------------------------------------------------- /proc helpers


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root):
    """Summed RSS of root's descendants (root is /usr/bin/time: excluded)."""
    total, stack, seen = 0, children(root), set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        total += rss_bytes(p)
        stack.extend(children(p))
    return total


def child_cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # after the comm: state is fields[0]; cutime, cstime are stat 16, 17
        return int(fields[13]) + int(fields[14])
    except (OSError, IndexError, ValueError):
        return None


# ------------------------------------------------------------------- the fleet


class Fleet:
    def __init__(self, d, n, ssh_config=None):
        self.dir = d
        self.n = n
        # with --rtt: the relayed ssh_config (tests/harness/delayrelay.sh)
        self.ssh_config = ssh_config or os.path.join(d, "ssh_config")
        self.names = []
        with open(os.path.join(d, "instances.tsv")) as f:
            for line in f:
                if line.strip():
                    self.names.append(line.split("\t")[0])
        if len(self.names) != n:
            sys.exit(f"bench: fleet has {len(self.names)} instances, expected {n}")
        groups = os.path.join(d, "groups")
        self.groups = sorted(os.path.join(groups, g) for g in os.listdir(groups))
        self.log_pos = {}
        for g in self.groups:
            self.log_pos[g] = self._log_size(g)

    def listeners(self):
        pids = []
        for g in self.groups:
            try:
                with open(os.path.join(g, "sshd.pid")) as f:
                    pids.append(int(f.read().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
        return pids

    @staticmethod
    def _log_size(g):
        try:
            return os.path.getsize(os.path.join(g, "sshd.log"))
        except OSError:
            return 0

    def drain(self, limit=10.0):
        """Wait until no sshd listener has a connection process left."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if not any(children(p) for p in self.listeners()):
                return True
            time.sleep(0.02)
        return False

    def sshd_ticks(self):
        total = 0
        for p in self.listeners():
            t = child_cpu_ticks(p)
            if t is None:
                return None
            total += t
        return total

    def new_logins(self):
        """'Accepted publickey' lines logged since the last call."""
        count = 0
        for g in self.groups:
            path = os.path.join(g, "sshd.log")
            try:
                with open(path, "rb") as f:
                    f.seek(self.log_pos[g])
                    data = f.read()
                    self.log_pos[g] = f.tell()
            except OSError:
                continue
            count += data.count(b"Accepted publickey for ")
        return count


# ------------------------------------------------------------------- the tools


class Tool:
    """One row of the table: a tool with one set of options."""

    max_reps = None  # at most this many repetitions (None: no limit)
    cmds = None  # the commands it runs (None: every one)

    def __init__(self, name, variant, slow=False):
        self.name = name
        self.variant = variant
        self.slow = slow  # OpenSSH default kex: fewer repetitions

    def argv_env(self, fl, cmd, ctx):
        raise NotImplementedError

    def verify(self, fl, cmd, rc, out, err):
        """Return None if every host ran cmd, else the reason."""
        raise NotImplementedError


def check_prefixed(fl, cmd, out):
    """'NAME: line' output: each host printed exactly seq 1..100."""
    if cmd == "true":
        return None if not out.strip() else "unexpected output"
    want = [str(i) for i in range(1, 101)]
    got = {}
    for line in out.splitlines():
        name, sep, rest = line.partition(": ")
        if not sep:
            return f"unparsable line {line[:60]!r}"
        got.setdefault(name, []).append(rest)
    bad = [h for h in fl.names if got.get(h) != want]
    extra = set(got) - set(fl.names)
    if bad or extra:
        return (f"{len(fl.names) - len(bad)}/{len(fl.names)} hosts printed 1..100"
                + (f", unknown hosts {sorted(extra)[:3]}" if extra else ""))
    return None


def check_blocks(fl, cmd, rc, out, err, blocks, ok_word):
    """Each host's block of output lines (after its status line) is what
    cmd prints, and every host has one."""
    if rc != 0:
        return f"exit {rc}: {first_line(out) or first_line(err)}"
    if sorted(blocks) != sorted(fl.names):
        return f"{len(blocks)}/{fl.n} hosts reported {ok_word}"
    want = [] if cmd == "true" else [str(i) for i in range(1, 101)]
    bad = [h for h, lines in blocks.items() if lines != want]
    if bad:
        return f"{fl.n - len(bad)}/{fl.n} hosts printed the expected output"
    return None


def first_line(s):
    for line in s.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


GF_ENGINE = ("gpufleet", "(its engine)")
GF_WINDOW_OFF = ("gpufleet", "handshake_window off")
GF_STATUS = ("gpufleet status", "(agent deployed)")


class Gpufleet(Tool):
    def __init__(self, binary, work, variant=GF_ENGINE[1], config="gpufleet.ini"):
        super().__init__("gpufleet", variant)
        self.binary = binary
        self.work = work
        self.config = config

    def env(self, ctx):
        return dict(ctx, GPUFLEET_DB=os.path.join(self.work, "fleet.db"),
                    GPUFLEET_CONFIG=os.path.join(self.work, self.config),
                    GPUFLEET_NO_PROGRESS="1")

    def argv_env(self, fl, cmd, ctx):
        return ([self.binary, "exec", "all", "-f", str(fl.n), "--"] + cmd.split(),
                self.env(ctx))

    def verify(self, fl, cmd, rc, out, err):
        n = fl.n
        if rc != 0 or f"{n} hosts: {n} ok" not in err:
            return f"exit {rc}: {first_line(err)}"
        return check_prefixed(fl, cmd, out)


class GpufleetStatus(Gpufleet):
    """`gpufleet status` of every host, compared with `exec all -- true`:
    one login per host once the warm-up has deployed the agent."""

    cmds = ("true",)  # one row in the `true` table: x gpufleet is the ratio

    def __init__(self, binary, work, agent):
        super().__init__(binary, work)
        self.name, self.variant = GF_STATUS
        self.agent = agent

    def argv_env(self, fl, cmd, ctx):
        return [self.binary, "status"], dict(self.env(ctx), GPUFLEET_AGENT=self.agent)

    def verify(self, fl, cmd, rc, out, err):
        if rc != 0:
            return f"exit {rc}: {first_line(err) or first_line(out)}"
        up = set()
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 2 and f[1] == "up":
                up.add(f[0])
        if up != set(fl.names):
            return f"{len(up & set(fl.names))}/{fl.n} hosts up"
        return None


class Pdsh(Tool):
    def argv_env(self, fl, cmd, ctx):
        extra = f"-F {fl.ssh_config}"
        if self.variant != "defaults":
            extra += f" -o KexAlgorithms={KEX}"
        env = dict(ctx, PDSH_SSH_ARGS_APPEND=extra)
        return ["pdsh", "-S", "-R", "ssh", "-f", str(fl.n),
                "-w", f"inst-[1-{fl.n}]", cmd], env

    def verify(self, fl, cmd, rc, out, err):
        if rc != 0:
            return f"exit {rc}: {first_line(err)}"
        return check_prefixed(fl, cmd, out)


class Clush(Tool):
    def argv_env(self, fl, cmd, ctx):
        opts = f"-F {fl.ssh_config}"
        if self.variant != "defaults":
            opts += f" -o KexAlgorithms={KEX}"
        return ["clush", "-S", "-o", opts, "-f", str(fl.n),
                "-w", f"inst-[1-{fl.n}]", cmd], dict(ctx)

    def verify(self, fl, cmd, rc, out, err):
        if rc != 0:
            return f"exit {rc}: {first_line(err)}"
        return check_prefixed(fl, cmd, out)


ANSIBLE_STATUS = re.compile(r"^(\S+) \| ([A-Z]+!?)(?: \| rc=(-?\d+))?")


class Ansible(Tool):
    """ansible -m command, forks = N, over OpenSSH with the fleet's ssh_config
    (no ControlMaster: every run logs in afresh), pipelining on and the
    remote Python named, so that each host costs one login."""

    max_reps = 1  # slow: one repetition is enough

    def __init__(self, variant, hostfile, work):
        super().__init__("ansible", variant, slow=True)
        self.hostfile = hostfile
        self.work = work

    def argv_env(self, fl, cmd, ctx):
        args = f"-F {fl.ssh_config} -o ControlMaster=no -o ControlPath=none"
        if self.variant != "defaults":
            args += f" -o KexAlgorithms={KEX}"
        env = dict(ctx, ANSIBLE_SSH_ARGS=args, ANSIBLE_PIPELINING="True",
                   ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
                   ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_GATHERING="explicit",
                   ANSIBLE_NOCOLOR="1", ANSIBLE_SSH_RETRIES="0",
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.work, "ansible-tmp"),
                   ANSIBLE_HOME=os.path.join(self.work, "ansible-home"))
        return ["ansible", "all", "-i", self.hostfile, "-m", "command",
                "-a", cmd, "-f", str(fl.n)], env

    def verify(self, fl, cmd, rc, out, err):
        blocks, cur = {}, None
        for line in out.splitlines():
            m = ANSIBLE_STATUS.match(line)
            if m and m.group(1) in fl.names:
                if m.group(2) != "CHANGED" or m.group(3) != "0":
                    return f"exit {rc}: {line[:160]}"
                cur = m.group(1)
                blocks[cur] = []
            elif cur is not None:
                if line.strip():
                    blocks[cur].append(line)
            else:
                return f"unparsable line {line[:60]!r}"
        return check_blocks(fl, cmd, rc, out, err, blocks, "CHANGED rc=0")


PSSH_STATUS = re.compile(r"^\[\d+\] \d\d:\d\d:\d\d \[(SUCCESS|FAILURE)\] (\S+)")


class Pssh(Tool):
    def __init__(self, variant, hostfile, slow=False):
        super().__init__("parallel-ssh", variant, slow)
        self.hostfile = hostfile

    def argv_env(self, fl, cmd, ctx):
        opts = f"-F {fl.ssh_config}"
        if self.variant != "defaults":
            opts += f" -o KexAlgorithms={KEX}"
        # -i: each host's output after its status line (its usual mode)
        return ["parallel-ssh", "-x", opts, "-p", str(fl.n), "-h", self.hostfile,
                "-i", cmd], dict(ctx)

    def verify(self, fl, cmd, rc, out, err):
        blocks, cur = {}, None
        for line in out.splitlines():
            m = PSSH_STATUS.match(line)
            if m:
                if m.group(1) != "SUCCESS":
                    return f"exit {rc}: {line[:160]}"
                cur = m.group(2)
                blocks[cur] = []
            elif cur is not None:
                blocks[cur].append(line)
            else:
                return f"unparsable line {line[:60]!r}"
        return check_blocks(fl, cmd, rc, out, err, blocks, "SUCCESS")


# ---------------------------------------------------------------------- a run


def run_once(tool, fl, cmd, work, timeout, ctx):
    argv, env = tool.argv_env(fl, cmd, ctx)
    tfile = os.path.join(work, "time.out")
    outf = os.path.join(work, "run.stdout")
    errf = os.path.join(work, "run.stderr")
    fl.drain()
    fl.new_logins()  # skip whatever came before
    ticks0 = fl.sshd_ticks()
    with open(outf, "wb") as o, open(errf, "wb") as e:
        t0 = time.monotonic()
        p = subprocess.Popen(["/usr/bin/time", "-o", tfile, "-f", "%e %U %S %M"] + argv,
                             stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=env,
                             start_new_session=True)
        peak_tree = 0
        timed_out = False
        try:
            while True:
                try:
                    p.wait(timeout=SAMPLE_S)
                    break
                except subprocess.TimeoutExpired:
                    peak_tree = max(peak_tree, tree_rss(p.pid))
                    if time.monotonic() - t0 > timeout:
                        timed_out = True
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
                        break
        except BaseException:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            raise
        wall_outer = time.monotonic() - t0
    drained = fl.drain()
    ticks1 = fl.sshd_ticks()
    logins = fl.new_logins()
    with open(outf, errors="replace") as f:
        out = f.read()
    with open(errf, errors="replace") as f:
        err = f.read()
    res = {"tool": tool.name, "variant": tool.variant, "cmd": cmd, "rc": p.returncode}
    try:
        with open(tfile) as f:
            lines = f.read().strip().splitlines()
        e, u, s, m = lines[-1].split()
        res.update(wall=float(e), cpu=round(float(u) + float(s), 2), maxrss=int(m) * 1024)
    except (OSError, ValueError, IndexError):
        res.update(wall=round(wall_outer, 3), cpu=None, maxrss=None)
    res["tree_rss"] = max(peak_tree, res.get("maxrss") or 0)
    res["sshd_cpu"] = (None if ticks0 is None or ticks1 is None
                       else round((ticks1 - ticks0) / TICK, 2))
    if timed_out:
        res["error"] = f"timed out after {timeout} s (killed)"
    else:
        # the exit status of the tool is what time reports as its own
        rc = p.returncode
        res["error"] = tool.verify(fl, cmd, rc, out, err)
        if res["error"] is None and logins != fl.n:
            res["error"] = f"sshd logged {logins} logins, expected {fl.n}"
    if res["error"] is None and not drained:
        res["note"] = "sshd connections still open 10 s after the run"
    return res


# ---------------------------------------------------------------- the report


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def row_stats(rs):
    """Medians (wall, CPU) and maxima (RSS) of one row's verified runs."""
    ok = [r for r in rs if r["error"] is None]
    return {
        "ok": f"{len(ok)}/{len(rs)}",
        "wall": median([r["wall"] for r in ok]),
        "cpu": median([r["cpu"] for r in ok]),
        "sshd": median([r["sshd_cpu"] for r in ok]),
        "rss": max([r["maxrss"] for r in ok if r["maxrss"]], default=None),
        "tree": max([r["tree_rss"] for r in ok if r["tree_rss"]], default=None),
    }


def table(n, rows, runs, reps, slow_reps, rtt=""):
    cmds = ["true", "seq 100"]
    lines = []
    head = (f"{'command':<8} {'tool':<15} {'variant':<20} {'ok':>5} {'wall s':>7} "
            f"{'x gpufleet':>10} {'client CPU s':>12} {'sshd CPU s':>10} "
            f"{'peak RSS MiB':>12} {'tree RSS MiB':>12}")
    lines.append(f"N = {n} (fan-out {n}; medians of {reps} runs, {slow_reps} for "
                 f"OpenSSH default kex{rtt})")
    lines.append(head)
    lines.append("-" * len(head))
    failures = []
    for cmd in cmds:
        base = None
        stats = []
        for t in rows:
            rs = [r for r in runs if r["tool"] == t.name and r["variant"] == t.variant
                  and r["cmd"] == cmd]
            ok = [r for r in rs if r["error"] is None]
            for r in rs:
                if r["error"] is not None:
                    failures.append(f"  {cmd}: {t.name} {t.variant}: {r['error']}")
            st = row_stats(rs)
            if (t.name, t.variant) == GF_ENGINE:
                base = st["wall"]
            stats.append((t, st))
        for t, st in stats:
            if st["ok"] == "0/0":
                if t.cmds is None or cmd in t.cmds:
                    lines.append(f"{cmd:<8} {t.name:<15} {t.variant:<20} {'-':>5} "
                                 f"{'not run':>7}")
                continue
            if st["wall"] is None:
                lines.append(f"{cmd:<8} {t.name:<15} {t.variant:<20} {st['ok']:>5} "
                             f"{'FAILED':>7}")
                continue
            ratio = st["wall"] / base if base else None
            mib = 1024 * 1024
            lines.append(
                f"{cmd:<8} {t.name:<15} {t.variant:<20} {st['ok']:>5} "
                f"{st['wall']:>7.2f} {fmt(ratio, '>10.2f'):>10} "
                f"{fmt(st['cpu'], '>12.2f'):>12} {fmt(st['sshd'], '>10.2f'):>10} "
                f"{fmt(st['rss'] and st['rss'] / mib, '>12.1f'):>12} "
                f"{fmt(st['tree'] and st['tree'] / mib, '>12.1f'):>12}")
    if failures:
        lines.append("failed runs (not in the medians):")
        lines.extend(failures)
    return "\n".join(lines)


def cmd_run(a):
    fl = Fleet(a.fleet, a.n, a.ssh_config)
    hostfile = os.path.join(a.work, f"hosts-{a.n}")
    with open(hostfile, "w") as f:
        f.write("\n".join(fl.names) + "\n")
    ctx = {k: v for k, v in os.environ.items()
           if not k.startswith(("PDSH_", "GPUFLEET_", "SSH_AUTH_SOCK"))}
    rows = [Gpufleet(a.gpufleet, a.work)]
    if a.window_off_config:
        rows.append(Gpufleet(a.gpufleet, a.work, GF_WINDOW_OFF[1], a.window_off_config))
    rows.append(GpufleetStatus(a.gpufleet, a.work, a.agent))
    missing, skipped = [], []
    for name, ok in (("pdsh", a.have_pdsh), ("clush", a.have_clush),
                     ("parallel-ssh", a.have_pssh), ("ansible", a.have_ansible)):
        if name == "ansible":
            if not ok:
                missing.append(name)
            elif a.n > a.ansible_max_n:
                skipped.append(f"ansible (only at N <= {a.ansible_max_n}: it is slow)")
            else:
                rows.append(Ansible(f"kex {KEX.split('-')[0]}", hostfile, a.work))
            continue
        if not ok:
            missing.append(name)
            continue
        for variant, slow in (("defaults", True), (f"kex {KEX.split('-')[0]}", False)):
            if name == "pdsh":
                rows.append(Pdsh("pdsh", variant, slow))
            elif name == "clush":
                rows.append(Clush("clush", variant, slow))
            else:
                rows.append(Pssh(variant, hostfile, slow))

    log = open(os.path.join(a.work, f"runs-{a.n}.jsonl"), "a")
    rtt = f", {a.rtt} ms round trip through tests/harness/delayrelay" if a.rtt else ""
    runs = []

    def progress(msg):
        print(f"bench: N={a.n}: {msg}", file=sys.stderr, flush=True)

    # warm-up: one verified `true` per tool (fast variant); also pins the
    # host keys in gpufleet's throw-away database (accept-new) and deploys
    # the agent for `status` (its first run uploads it: not verified)
    for t in rows:
        if t.slow:
            continue
        if isinstance(t, GpufleetStatus):
            run_once(t, fl, "true", a.work, a.timeout, ctx)  # deploys
        r = run_once(t, fl, "true", a.work, a.timeout, ctx)
        progress(f"warm-up {t.name} {t.variant}: "
                 + ("ok" if r["error"] is None else f"FAILED: {r['error']}")
                 + f" ({r['wall']:.2f} s)")

    t_start = time.monotonic()
    for rep in range(a.reps):
        k = rep % len(rows)
        order = rows[k:] + rows[:k]  # rotate so no tool always goes first
        for cmd in ("true", "seq 100"):
            for t in order:
                if t.slow and rep >= a.slow_reps:
                    continue
                if t.max_reps is not None and rep >= t.max_reps:
                    continue
                if t.cmds is not None and cmd not in t.cmds:
                    continue
                if t.slow and cmd != "true" and a.n > SLOW_SEQ_MAX_N:
                    continue  # keeps the full run under 15 minutes
                r = run_once(t, fl, cmd, a.work, a.timeout, ctx)
                r["rep"] = rep + 1
                runs.append(r)
                log.write(json.dumps(r) + "\n")
                log.flush()
                progress(f"rep {rep + 1} {cmd!r:10} {t.name:<15} {t.variant:<20} "
                         + (f"{r['wall']:6.2f} s" if r["error"] is None
                            else f"FAILED: {r['error']}"))
    elapsed = time.monotonic() - t_start
    text = table(a.n, rows, runs, a.reps, a.slow_reps, rtt)
    if missing:
        text += "\nnot measured (not installed): " + ", ".join(missing)
    if a.n > SLOW_SEQ_MAX_N:
        skipped.append("`seq 100` with the OpenSSH default kex "
                       f"(only at N <= {SLOW_SEQ_MAX_N}, to keep the run short)")
    if skipped:
        text += "\nnot measured: " + ", ".join(skipped)
    text += f"\n(timed runs took {elapsed:.0f} s; load average after: " \
            f"{open('/proc/loadavg').read().split()[0]})\n"
    print(text, flush=True)
    with open(a.results, "a") as f:
        f.write(text + "\n")
        f.write(f"raw runs, N = {a.n} (wall s, client CPU s, sshd CPU s, peak RSS KiB, tree RSS KiB):\n")
        for r in runs:
            f.write(f"  rep {r['rep']} {r['cmd']:<8} {r['tool']:<15} {r['variant']:<20} "
                    f"{r['wall']:>7.2f} {fmt(r['cpu'], '.2f'):>6} {fmt(r['sshd_cpu'], '.2f'):>6} "
                    f"{fmt(r['maxrss'] and r['maxrss'] // 1024, 'd'):>7} "
                    f"{fmt(r['tree_rss'] and r['tree_rss'] // 1024, 'd'):>8} "
                    f"{'ok' if r['error'] is None else 'FAILED: ' + r['error']}\n")
        f.write("\n")


# ---------------------------------------------------- the committed report

MIB = 1024 * 1024


def load_runs(work):
    """Every run of every N, from the runs-N.jsonl files in work."""
    by_n = {}
    for name in os.listdir(work):
        m = re.fullmatch(r"runs-(\d+)\.jsonl", name)
        if not m:
            continue
        with open(os.path.join(work, name)) as f:
            by_n[int(m.group(1))] = [json.loads(line) for line in f if line.strip()]
    return dict(sorted(by_n.items()))


def row_keys(runs):
    """(tool, variant) in order of first appearance, gpufleet first."""
    keys = []
    for r in runs:
        k = (r["tool"], r["variant"])
        if k not in keys:
            keys.append(k)
    keys.sort(key=lambda k: not k[0].startswith("gpufleet"))
    return keys


def md_num(x, spec, scale=1.0):
    return "-" if x is None else format(x / scale, spec)


def targets(n, stats, cores, rtt=0):
    """The issue's targets at this N for `true`, as (target, value, met);
    met None: a measure with no target.  With a round trip (rtt ms) the run
    is bound by latency, not CPU: the CPU bound gives way to the wall time
    in round trips."""
    gf = stats.get(GF_ENGINE)
    if gf is None or gf["wall"] is None:
        return [("gpufleet ran", "no verified run", False)]
    kex = f"kex {KEX.split('-')[0]}"
    same = [(k, st) for k, st in stats.items()
            if k[0] != "gpufleet" and k[1] == kex and st["wall"] is not None]
    dflt = [(k, st) for k, st in stats.items()
            if k[0] != "gpufleet" and k[1] == "defaults" and st["wall"] is not None]
    out = []
    for label, peers, bound in (("same kex", same, 0.5), ("defaults", dflt, 0.25)):
        if not peers:
            continue
        k, st = min(peers, key=lambda p: p[1]["wall"])
        ratio = gf["wall"] / st["wall"]
        out.append((f"wall <= {bound}x fastest peer, {label}",
                    f"{ratio:.2f}x ({k[0]} {st['wall']:.2f} s)", ratio <= bound))
    if rtt:
        out.append((f"wall in round trips of {rtt} ms (latency-bound: no target)",
                    f"{1000 * gf['wall'] / rtt:.1f}", None))
    elif gf["sshd"] is not None and gf["cpu"] is not None:
        limit = (gf["sshd"] + gf["cpu"]) / cores
        out.append(("wall <= 1.25x (sshd CPU + gpufleet CPU) / cores",
                    f"{gf['wall'] / limit:.2f}x ({gf['wall']:.2f} s against "
                    f"{limit:.2f} s)", gf["wall"] <= 1.25 * limit))
    logins = [(k, st) for k, st in same if st["sshd"] is not None]
    if gf["sshd"] is not None and logins:
        k, st = min(logins, key=lambda p: p[1]["sshd"])
        ratio = gf["sshd"] / st["sshd"]
        out.append(("sshd CPU per login <= 1.05x an OpenSSH login, same kex",
                    f"{ratio:.2f}x ({1000 * gf['sshd'] / n:.1f} ms against "
                    f"{1000 * st['sshd'] / n:.1f} ms, {k[0]})", ratio <= 1.05))
    if gf["cpu"] is not None:
        ms = 1000 * gf["cpu"] / n
        out.append(("gpufleet CPU <= 3 ms per host", f"{ms:.1f} ms", ms <= 3))
    off = stats.get(GF_WINDOW_OFF)
    if off is not None and off["wall"] is not None:
        ratio = gf["wall"] / off["wall"]
        out.append((f"handshake window costs nothing: wall with it <= {WINDOW_NOISE}x "
                    "wall with handshake_window = off",
                    f"{ratio:.2f}x ({gf['wall']:.2f} s against {off['wall']:.2f} s)",
                    ratio <= WINDOW_NOISE))
    st = stats.get(GF_STATUS)
    if st is not None and st["wall"] is not None:
        ratio = st["wall"] / gf["wall"]
        out.append(("`status` < 2x `exec all -- true`, same hosts",
                    f"{ratio:.2f}x ({st['wall']:.2f} s against {gf['wall']:.2f} s)",
                    ratio < 2))
    if gf["rss"] is not None and n >= 500:
        out.append(("gpufleet peak RSS <= 100 MiB at N = 500",
                    f"{gf['rss'] / MIB:.1f} MiB", gf["rss"] <= 100 * MIB))
    return out


def cmd_report(a):
    by_n = load_runs(a.work)
    if not by_n:
        sys.exit("bench: no runs to report")
    with open(a.header) as f:
        header = f.read().split("\n\n", 1)[0].strip().splitlines()
    h = "###" if a.rtt else "##"
    md = []
    if a.rtt:
        md += [f"## Latency: {a.rtt} ms round trip", "",
               f"Every tool through tests/harness/delayrelay ({a.rtt // 2} ms each way, "
               "one relay port per instance, the relayed ssh_config and known_hosts: host "
               "keys still checked); `bash bench/exec.sh --rtt "
               f"{a.rtt} {' '.join(str(n) for n in by_n)}`. gpufleet also with "
               "`[ssh] handshake_window = off`, and `gpufleet status` against "
               "`exec all -- true`.", ""]
    else:
        md += [f"# gpufleet exec benchmark, {a.date}", ""]
    md += ["```"] + header + ["```", ""]
    md += ["Columns: median wall time; x gpufleet = wall / gpufleet's wall for the",
           "same command and N; client CPU = user+sys of the tool and its children;",
           "sshd CPU = CPU reaped by the fleet's sshd listeners during the run (child",
           "subreapers: the session processes their monitors orphan included), and",
           "per login that divided by N; peak RSS = the largest single process.",
           "Only verified runs count (every host ran the command, N logins in the",
           "sshd logs); ok = verified runs / runs.", ""]
    plot = {}
    for n, runs in by_n.items():
        keys = row_keys(runs)
        for cmd in ("true", "seq 100"):
            stats = {k: row_stats([r for r in runs if (r["tool"], r["variant"]) == k
                                   and r["cmd"] == cmd]) for k in keys}
            stats = {k: st for k, st in stats.items() if st["ok"] != "0/0"}
            if not stats:
                continue
            base = stats.get(GF_ENGINE, {}).get("wall")
            md += [f"{h} N = {n}, `{cmd}`" + (f", {a.rtt} ms round trip" if a.rtt else ""), "",
                   "| tool | variant | ok | wall s | x gpufleet | client CPU s | "
                   "sshd CPU s | sshd CPU per login ms | peak RSS MiB |",
                   "|---|---|---|---:|---:|---:|---:|---:|---:|"]
            for k, st in stats.items():
                ratio = st["wall"] / base if base and st["wall"] else None
                per = st["sshd"] * 1000 / n if st["sshd"] is not None else None
                md.append(f"| {k[0]} | {k[1]} | {st['ok']} | {md_num(st['wall'], '.2f')} | "
                          f"{md_num(ratio, '.2f')} | {md_num(st['cpu'], '.2f')} | "
                          f"{md_num(st['sshd'], '.2f')} | {md_num(per, '.1f')} | "
                          f"{md_num(st['rss'], '.1f', MIB)} |")
                if cmd == "true" and st["wall"] is not None:
                    plot.setdefault(k, {})[n] = st["wall"]
            fails = [f"- {r['tool']} {r['variant']}, rep {r.get('rep', '?')}: {r['error']}"
                     for r in runs if r["cmd"] == cmd and r["error"] is not None]
            if fails:
                md += ["", "Failed runs (not in the medians):"] + fails
            md.append("")
            if cmd == "true":
                md += [f"Targets at N = {n} (`true`):", "",
                       "| target | measured | met |", "|---|---|---|"]
                for what, val, met in targets(n, stats, a.cores, a.rtt):
                    met = "-" if met is None else "yes" if met else "**no**"
                    md.append(f"| {what} | {val} | {met} |")
                md.append("")
    if a.notes and os.path.exists(a.notes):
        with open(a.notes) as f:
            md += [f.read().rstrip(), ""]
    write_report(a.out, md, f"rtt {a.rtt}" if a.rtt else None, a.date)
    if a.png:
        write_plot(plot, a.png, a.work, a.date)


SECTION = re.compile(r"<!-- (rtt \d+): begin -->\n.*?<!-- \1: end -->\n", re.S)


def write_report(path, md, section, date):
    """Write the report to path.  The latency runs (section "rtt MS") are
    sections of the day's file between markers: a latency run replaces its
    own section and keeps the rest; the main run rewrites the rest and keeps
    every latency section."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    kept = {m.group(1): m.group(0) for m in SECTION.finditer(old)}
    if section is None:
        text = "\n".join(md).rstrip() + "\n"
    else:
        kept[section] = (f"<!-- {section}: begin -->\n" + "\n".join(md).rstrip()
                         + f"\n<!-- {section}: end -->\n")
        text = SECTION.sub("", old).rstrip()
        text = (text or f"# gpufleet exec benchmark, {date}") + "\n"
    for k in sorted(kept):
        text += "\n" + kept[k]
    with open(path, "w") as f:
        f.write(text)


def write_plot(plot, png, work, date):
    """Wall time of `true` against N, one line per tool (gnuplot)."""
    dat = os.path.join(work, "plot.dat")
    names = []
    with open(dat, "w") as f:
        for k, pts in plot.items():
            names.append(f"{k[0]} {k[1]}".replace('"', ""))
            for n in sorted(pts):
                f.write(f"{n} {pts[n]}\n")
            f.write("\n\n")
    script = [
        "set terminal pngcairo size 900,560 font 'sans,10'",
        f"set output '{png}'",
        f"set title 'gpufleet exec vs peers: wall time of `true` on N hosts, fan-out N ({date})'",
        "set xlabel 'N (hosts)'", "set ylabel 'wall time, s (median)'",
        "set key outside right top", "set grid", "set logscale y",
        "set xtics (50, 200, 500)" if len({n for p in plot.values() for n in p}) > 1 else "",
        "plot " + ", ".join(
            f"'{dat}' index {i} using 1:2 with linespoints lw {3 if i == 0 else 1} "
            f"title \"{name}\"" for i, name in enumerate(names)),
    ]
    try:
        r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                           capture_output=True)
    except FileNotFoundError:
        print("bench: no plot: gnuplot not found (Debian package gnuplot-nox)",
              file=sys.stderr)
        return
    if r.returncode != 0:
        print(f"bench: gnuplot failed: {first_line(r.stderr)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fleet", required=True)
    r.add_argument("--n", type=int, required=True)
    r.add_argument("--gpufleet", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--slow-reps", type=int, default=2)
    r.add_argument("--timeout", type=float, default=180)
    r.add_argument("--results", required=True)
    r.add_argument("--have-pdsh", type=int, default=1)
    r.add_argument("--have-clush", type=int, default=1)
    r.add_argument("--have-pssh", type=int, default=1)
    r.add_argument("--have-ansible", type=int, default=1)
    r.add_argument("--ssh-config")
    r.add_argument("--rtt", type=int, default=0)
    r.add_argument("--window-off-config")
    r.add_argument("--agent", required=True)
    r.add_argument("--ansible-max-n", type=int, default=ANSIBLE_MAX_N)
    p = sub.add_parser("report")
    p.add_argument("--work", required=True)
    p.add_argument("--header", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--png")
    p.add_argument("--notes")
    p.add_argument("--date", required=True)
    p.add_argument("--cores", type=int, default=os.cpu_count())
    p.add_argument("--rtt", type=int, default=0)
    a = ap.parse_args()
    try:
        if a.cmd == "report":
            cmd_report(a)
            return
        cmd_run(a)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
