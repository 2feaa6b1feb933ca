#!/usr/bin/env python3
"""Where one run's CPU goes, for the profile in bench/profile.md.

    python3 bench/cpuacct.py FLEET_DIR N -- COMMAND [ARG...]

Runs COMMAND once against a running fleet of N instances (tests/harness/fleet)
and prints its wall time, the machine's busy and idle CPU over the run
(/proc/stat), the CPU the fleet's sshd listeners reaped from their children
(what bench/exec.sh counts as sshd CPU), the listeners' own CPU, the CPU pid 1
reaped meanwhile, and COMMAND's own (its children's rusage).

Pid 1 matters because sshd's privileged monitor exits without waiting for its
post-auth child ("sshd: USER@notty", which ran the user's shell): that child
is reparented to pid 1 and its CPU never reaches the listener.  Pid 1 reaps
whatever else is orphaned on the machine as well, so run it on a quiet one;
it waits for pid 1 to have no zombie children before and after.
"""

import os
import sys
import time
import subprocess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exec_bench as eb  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def own_and_reaped(pid):
    x = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(x[11]) + int(x[12]), int(x[13]) + int(x[14])


def busy_idle():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:8]]
    return sum(v) - v[3] - v[4], v[3] + v[4]


def init_zombies():
    z = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                x = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            z += x[0] == "Z" and x[1] == "1"
    return z


def settle(limit=10.0):
    end = time.monotonic() + limit
    while init_zombies() and time.monotonic() < end:
        time.sleep(0.05)


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: cpuacct.py FLEET_DIR N -- COMMAND [ARG...]")
    n = int(sys.argv[2])
    fl = eb.Fleet(sys.argv[1], n)
    ls = fl.listeners()
    settle()
    a = [own_and_reaped(p) for p in ls]
    i0, s0, r0 = own_and_reaped(1), busy_idle(), os.times()
    t0 = time.monotonic()
    rc = subprocess.run(sys.argv[4:], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    s1, r1 = busy_idle(), os.times()
    fl.drain()
    settle()
    b = [own_and_reaped(p) for p in ls]
    i1 = own_and_reaped(1)
    reaped = sum(y[1] - x[1] for x, y in zip(a, b)) / TICK
    own = sum(y[0] - x[0] for x, y in zip(a, b)) / TICK
    init = (i1[1] - i0[1]) / TICK
    tool = (r1.children_user + r1.children_system -
            r0.children_user - r0.children_system)
    cores = os.cpu_count()
    print(f"{os.path.basename(sys.argv[4])} rc={rc} wall={wall:.2f} "
          f"busy={(s1[0] - s0[0]) / TICK:.2f} idle={(s1[1] - s0[1]) / TICK:.2f} "
          f"sshd_reaped={reaped:.2f} listeners_own={own:.2f} "
          f"pid1_reaped={init:.2f} tool={tool:.2f}")
    print(f"  wall / ((sshd_reaped + tool) / cores) = "
          f"{wall / ((reaped + tool) / cores):.2f} (bench/exec.sh's ratio)")
    print(f"  wall / ((sshd_reaped + pid1_reaped + listeners_own + tool) / cores)"
          f" = {wall / ((reaped + init + own + tool) / cores):.2f}")


if __name__ == "__main__":
    main()
