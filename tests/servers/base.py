"""What every test server shares: free ports, the install cache and its lock, and
:class:`ServerProcess`, a child process in its own process group that is waited for until it
answers and always stopped.

Nothing here imports a client library (boto3, azure, kazoo): those are imported by the server
modules that need them, inside functions.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout's root (``tests/servers/base.py`` is two levels below it)."""

LOOPBACK = "127.0.0.1"
"""Every test server binds here and nowhere else."""


class ServerError(RuntimeError):
    """A test server could not be installed, started or stopped."""


class ServerUnavailable(ServerError):
    """A test server's software is missing and cannot be installed here (not root, no npm...).

    The fixtures turn this into a skip on a developer machine and into a failure under CI.
    """


def cache_dir() -> Path:
    """The install cache: ``$KT_CACHE_DIR`` or ``<repo>/.kt-cache`` (git-ignored)."""
    path = Path(os.environ.get("KT_CACHE_DIR") or REPO_ROOT / ".kt-cache")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def install_lock(name: str, timeout: float = 900.0) -> Iterator[None]:
    """An inter-process file lock named ``name`` in the cache, held while installing."""
    from filelock import FileLock

    lock = FileLock(str(cache_dir() / f"{name}.lock"), timeout=timeout)
    with lock:
        yield


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_answers(port: int, path: str = "/", method: str = "GET", timeout: float = 2.0) -> bool:
    """Whether an HTTP server on 127.0.0.1:``port`` answers ``method path`` (any status)."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request(method, path)
        conn.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def run_install(cmd: Sequence[str], log: Path, env: dict[str, str] | None = None,
                timeout: float = 900.0) -> None:
    """Run an install command, appending its output to ``log``; raise with its tail on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.run(list(cmd), stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env, timeout=timeout,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServerError(f"install step {cmd!r} failed: {exc}\n{tail(log)}") from exc
    if proc.returncode != 0:
        raise ServerError(
            f"install step {' '.join(cmd)!r} exited {proc.returncode}; log {log}:\n{tail(log)}"
        )


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file (empty if it does not exist)."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies, however it dies
    (a SIGKILLed or SIGTERMed pytest runs no finalizer and no atexit hook). Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="kt-server-spawner")


def _spawn(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` from one long-lived thread: the parent-death signal fires when the
    *thread* that forked the child ends, so a server (re)started by a short-lived thread of a
    fault test must not be forked by that thread."""
    return _SPAWNER.submit(subprocess.Popen, *args, **kwargs).result()


_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()
_OWNER_FILE = "owner.pid"


def _sweep_stale_workdirs(name: str) -> None:
    """Remove ``kt-<name>-*`` temp dirs left by test processes that were killed (SIGKILL runs
    no cleanup); a directory whose owning process is alive is left alone."""
    for stale in Path(tempfile.gettempdir()).glob(f"kt-{name}-*"):
        try:
            owner = int((stale / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if owner == os.getpid():
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(stale, ignore_errors=True)
        except PermissionError:
            continue


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: stop any server still running when the interpreter exits."""
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(timeout=3.0)


class ServerProcess:
    """A server run as a child process in its own process group.

    Subclasses give :meth:`command` and :meth:`probe` (is it ready?). The ports and the data
    directory are chosen once, so :meth:`stop` then :meth:`start` (or :meth:`restart`) brings
    the server back on the same port with the same data, as fault tests need. :meth:`close`
    stops it and removes its temporary directory. Usable as a context manager.
    """

    name: str = "server"
    startup_timeout: float = 60.0
    stop_timeout: float = 10.0

    def __init__(self, workdir: Path | None = None, *, startup_timeout: float | None = None):
        self._own_workdir = workdir is None
        if workdir is None:
            _sweep_stale_workdirs(self.name)
        self.workdir: Path = Path(workdir or tempfile.mkdtemp(prefix=f"kt-{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._own_workdir:
            (self.workdir / _OWNER_FILE).write_text(str(os.getpid()))
        self.data_dir: Path = self.workdir / "data"
        """The server's data directory; it survives :meth:`stop` / :meth:`start`."""
        self.data_dir.mkdir(exist_ok=True)
        self.log_path: Path = self.workdir / f"{self.name}.log"
        """Where the server's stdout and stderr go."""
        if startup_timeout is not None:
            self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self.closed = False

    # -- what a subclass gives ---------------------------------------------------------------
    def command(self) -> list[str]:
        """The command line that runs the server in the foreground."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        """The server's environment (default: ours)."""
        return dict(os.environ)

    def cwd(self) -> Path:
        """The server's working directory (default: its work dir)."""
        return self.workdir

    def probe(self) -> bool:
        """Whether the server answers yet (called repeatedly while starting)."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server (no-op when it runs) and wait until it answers.

        Raises :class:`ServerError` with the log's tail if it exits or does not answer within
        :attr:`startup_timeout` seconds (the process group is killed then).
        """
        with self._lock:
            if self.closed:
                raise ServerError(f"{self.name}: closed, cannot start again")
            if self.running:
                return
            cmd = self.command()
            with self.log_path.open("ab") as log:
                log.write(f"\n==== {time.strftime('%H:%M:%S')} start: {' '.join(cmd)}\n".encode())
                log.flush()
                self._proc = _spawn(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    cwd=self.cwd(), env=self.environment(), start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            _LIVE.add(self)
            deadline = time.monotonic() + self.startup_timeout
            while True:
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    self._proc = None
                    raise ServerError(
                        f"{self.name} exited with code {code} while starting; "
                        f"log {self.log_path}:\n{tail(self.log_path)}"
                    )
                if self.probe():
                    return
                if time.monotonic() > deadline:
                    self.stop(timeout=2.0)
                    raise ServerError(
                        f"{self.name} did not answer within {self.startup_timeout:.0f}s; "
                        f"log {self.log_path}:\n{tail(self.log_path)}"
                    )
                time.sleep(0.1)

    def _signal_group(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``timeout`` seconds.

        The port and the data directory are kept for :meth:`start`.
        """
        with self._lock:
            if self._proc is None:
                return
            wait = self.stop_timeout if timeout is None else timeout
            if self._proc.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self._proc.wait(timeout=10)
            # children that outlived their leader (npm wrappers, JVM helpers) die with the group
            self._signal_group(signal.SIGKILL)
            self._proc = None
            _LIVE.discard(self)
            self._wait_port_free()

    def kill(self) -> None:
        """Crash the server: SIGKILL its process group at once (no clean shutdown)."""
        with self._lock:
            if self._proc is None:
                return
            self._signal_group(signal.SIGKILL)
            self._proc.wait(timeout=10)
            self._proc = None
            _LIVE.discard(self)
            self._wait_port_free()

    def restart(self) -> None:
        """:meth:`stop` then :meth:`start`, on the same port and data directory."""
        self.stop()
        self.start()

    def ports(self) -> list[int]:
        """The TCP ports the server listens on (for waiting until they are free)."""
        return []

    def _wait_port_free(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        for port in self.ports():
            while port_open(port, timeout=0.2) and time.monotonic() < deadline:
                time.sleep(0.05)

    def close(self) -> None:
        """Stop the server for good and remove its temporary directory.

        Set ``KT_KEEP_SERVER_DIRS=1`` to keep the directory (and its log) for a post-mortem.
        """
        with self._lock:
            self.stop()
            self.closed = True
            if self._own_workdir and not os.environ.get("KT_KEEP_SERVER_DIRS"):
                shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        return tail(self.log_path, lines)

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {state} pid={self.pid} dir={self.workdir}>"


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
