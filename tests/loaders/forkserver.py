"""A fork server for the judges (vllm_check.py, hf_check.py): torch, transformers and vLLM take
10-20 s of CPU to import on a 2-core runner, and matrix.py and fp4_check.py run a judge some
seventy times, so each judge's libraries are imported once, in `python JUDGE --serve`, and every
run is a child forked from that process.

The server imports and does nothing else: a child starts from a process that has never computed
(no OpenMP thread pool: torch's libgomp pool does not survive a fork, a child of a process that
has used it hangs at its first parallel op) and so computes as a fresh process would. A request is
one line {"argv": [...], "log": PATH, "env": {...}, "cwd": DIR} on the server's stdin; the child
runs main(argv) in that environment and directory with its stdout and stderr in PATH, and the
server answers {"rc": its exit status} on stdout. FP8CHECK_NO_FORK=1 runs every judge as a
process of its own instead.
"""

import json
import os
import subprocess
import sys
import traceback


def forking():
    return os.environ.get("FP8CHECK_NO_FORK") != "1"


def serve(main, preload):
    """The server's loop: preload() (the imports), then one forked main(argv) per request."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the libraries say goes where stderr goes, never into the replies
    preload()
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                os.environ.update(req.get("env") or {})
                os.chdir(req.get("cwd") or ".")
                sys.argv = [sys.argv[0]] + req["argv"]
                code = main(req["argv"])
            except SystemExit as e:  # argparse
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code if isinstance(code, int) else 1)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


class Judge:
    """One judge script, run through its fork server (started at the first run), or as a process
    of its own under FP8CHECK_NO_FORK=1."""

    def __init__(self, script):
        self.script, self.server = script, None

    def run(self, argv, log, env=None, cwd=None, timeout=None):
        """`python SCRIPT ARGV` with env added, its output in log. -> exit status, or why none"""
        if not forking():
            with open(log, "w") as f:
                try:
                    return subprocess.run([sys.executable, self.script] + list(argv), stdout=f,
                                          stderr=subprocess.STDOUT, cwd=cwd, timeout=timeout,
                                          env=dict(os.environ, **(env or {}))).returncode
                except subprocess.TimeoutExpired:
                    return "timed out after %s s" % timeout
        p = self.server
        if p is None or p.poll() is not None:
            p = self.server = subprocess.Popen([sys.executable, self.script, "--serve"],
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               text=True)
        p.stdin.write(json.dumps({"argv": list(argv), "log": os.path.abspath(log),
                                  "env": env or {}, "cwd": os.path.abspath(cwd or ".")}) + "\n")
        p.stdin.flush()
        reply = p.stdout.readline()
        return json.loads(reply)["rc"] if reply else "its fork server died (exit %s)" % p.poll()


def tail(log, n=6000):
    try:
        with open(log, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""
