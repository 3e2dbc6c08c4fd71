"""Background processes owned through pid files: spawn, identify, stop, and who holds a port.

A pid file alone is not proof of ownership (pids are reused), so every check also matches the
process's command line against markers only our own processes carry (the state dir's config
path for Kafka, ``redis-server`` plus the port for Redis).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _reap(pid: int) -> None:
    """Collect a dead child of ours (the test fixture spawns the stack), so it is not a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_alive(pid: int) -> bool:
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state letter follows the parenthesised command name; Z = zombie, X = dead.
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in {"Z", "X"}


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())


def owned_pid(pid_file: Path, markers: Sequence[str]) -> int | None:
    """The live pid recorded in ``pid_file`` if it is still our process; else clears the file."""
    pid = read_pid(pid_file)
    if pid is None:
        return None
    if is_alive(pid) and all(m in cmdline(pid) for m in markers):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def spawn(
    argv: Sequence[str], *, log_path: Path, pid_file: Path, env: Mapping[str, str] | None = None
) -> int:
    """Start ``argv`` detached (own session, stdin closed, output appended to ``log_path``)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the shell that ran `up` must not reach it
            env=None if env is None else dict(env),
            close_fds=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def terminate(pid: int, *, grace: float) -> bool:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. True if it had to be killed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, grace):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10.0)
    return True


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.1)
    return not is_alive(pid)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Does something accept TCP connections on host:port?"""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_bindable(host: str, port: int) -> bool:
    """Could a server bind host:port now? (SO_REUSEADDR, as the JVM and Redis use.)"""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                    inodes.add(inode)
    return inodes


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def port_owner(port: int) -> tuple[int, str] | None:
    """(pid, command line) of the process listening on ``port``, when /proc lets us see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for pid in _pids():
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) in targets:
                        return pid, cmdline(pid)
    return None


def describe_port_owner(port: int) -> str:
    owner = port_owner(port)
    if owner is None:
        return f"port {port} is in use (owner not visible; try `ss -ltnp 'sport = :{port}'`)"
    pid, cmd = owner
    return f"port {port} is in use by pid {pid}: {cmd[:160]}"


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tail(path: Path, lines: int = 30, *, since: int = 0) -> str:
    """The last ``lines`` lines of a log file written after byte ``since`` ('' if none)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < since:  # rolled over since: show the new file
                since = 0
            f.seek(max(since, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
