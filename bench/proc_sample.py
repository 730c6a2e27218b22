#!/usr/bin/env python3
"""Where a command's threads wait: a poor man's profiler for machines with no
perf, strace or Nsight Systems (the lent GPU machines).  Runs CMD REPEAT times;
every INTERVAL ms reads, for each of its threads, /proc state, the system call
it is in (/proc/PID/task/TID/syscall) and the top of its kernel stack
(.../stack, root only), and prints the most frequent samples.

  proc_sample.py [--repeat N] [--interval MS] [--top K] -- CMD...
"""
import argparse
import collections
import os
import subprocess
import time

# x86-64 system call numbers fp8conv makes (asm/unistd_64.h)
SYSCALLS = {0: "read", 1: "write", 3: "close", 9: "mmap", 10: "mprotect", 11: "munmap",
            16: "ioctl", 17: "pread64", 18: "pwrite64", 24: "sched_yield", 202: "futex",
            230: "clock_nanosleep", 257: "openat", 7: "poll", 35: "nanosleep",
            281: "epoll_pwait", 232: "epoll_wait", 285: "fallocate", 40: "sendfile",
            326: "copy_file_range", 74: "fsync", 75: "fdatasync", 82: "rename", 87: "unlink",
            264: "renameat", 316: "renameat2", 228: "clock_gettime", 271: "ppoll"}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def sample(pid, frames):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        base = f"/proc/{pid}/task/{tid}"
        stat = read(f"{base}/stat")
        state = stat.rsplit(")", 1)[-1].split()[0] if stat else "?"
        sc = read(f"{base}/syscall").split()
        if not sc:
            continue
        if sc[0] == "running":
            call = "running"
        else:
            n = int(sc[0]) if sc[0].lstrip("-").isdigit() else -1
            call = "user" if n == -1 else SYSCALLS.get(n, f"syscall {n}")
        stack = [ln.split()[-1].split("+")[0] for ln in read(f"{base}/stack").splitlines() if ln.strip()]
        out.append((state, call, " < ".join(stack[:frames])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    counts, total, wall = collections.Counter(), 0, 0.0
    for _ in range(a.repeat):
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while p.poll() is None:
            for s in sample(p.pid, a.frames):
                counts[s] += 1
                total += 1
            time.sleep(a.interval / 1e3)
        wall += time.monotonic() - t0
        if p.returncode:
            print(f"exit {p.returncode}: {' '.join(cmd)}")
    print(f"{total} thread samples over {a.repeat} runs, {wall:.2f} s of wall time")
    for (state, call, stack), n in counts.most_common(a.top):
        print(f"{100 * n / max(total, 1):5.1f}%  {state} {call:12s} {stack}")


if __name__ == "__main__":
    main()
