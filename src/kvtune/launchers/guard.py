"""The server's guard: the process-group leader that takes the whole group down with kvtune.

The kernel's parent-death signal reaches only the direct child of kvtune, but vLLM forks more
processes (EngineCore, workers) that would survive a SIGKILL of kvtune and keep holding memory.
So kvtune starts this tiny guard as the group leader, which starts the server in the same group.
When kvtune dies, the guard gets SIGTERM from the kernel, sees its parent gone, and SIGKILLs the
whole group, itself included. On a normal stop kvtune signals the guard alone, the guard passes
the signal on to the server once (a server signalled twice may take the second as "exit now",
process.py `stop`), the server exits, and the guard exits with the server's status. Standard
library only, so it starts in milliseconds.

    python -m kvtune.launchers.guard -- SERVER ARGV...
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    server = argv[argv.index("--") + 1 :] if "--" in argv else argv
    if not server:
        print("usage: python -m kvtune.launchers.guard -- ARGV...", file=sys.stderr)
        return 2
    parent = os.getppid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    if os.getppid() != parent:  # kvtune died before the signal was armed
        return 1
    try:
        child = subprocess.Popen(server)
    except OSError as e:
        print(f"error: cannot execute {server[0]}: {e}", file=sys.stderr)
        return 127

    def on_signal(signum: int, frame: object) -> None:
        if os.getppid() != parent:  # kvtune is gone: nothing of this group may outlive it
            os.killpg(0, signal.SIGKILL)
        else:  # a normal stop: pass it on to the server, then wait for it to exit
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    rc = child.wait()
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
