"""``LocalServer.stop`` returns once the stopped server's ports are free, even when the process
that holds them outlives the pid it was stopped by (a JVM whose main thread has exited while its
other threads still hold the listening socket; here a child that inherited it), so a start right
after it does not meet its own server's port."""

from __future__ import annotations

import socket
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from helpers.local.server import LOOPBACK, LocalServer, ServerPort
from helpers.proc import free_port, port_in_use

#: Listens, hands the socket to a child that keeps it 1.5 s after the parent is gone, and exits
#: at once on SIGTERM.
_SERVER = textwrap.dedent(
    """
    import os, socket, subprocess, sys
    sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1]))); sock.listen()
    holder = (
        "import os, time\\n"
        "while os.getppid() == %d: time.sleep(0.02)\\n"
        "time.sleep(1.5)\\n" % os.getpid()
    )
    subprocess.Popen([sys.executable, "-c", holder], pass_fds=[sock.fileno()])
    while True:
        conn, _ = sock.accept(); conn.close()
    """
)


class _Lingering(LocalServer):
    name = "lingering"
    title = "the lingering test server"

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home, pid_file=home / "pid", log_file=home / "log", start_timeout_s=20.0)
        self.port = port

    @property
    def ports(self) -> Sequence[ServerPort]:
        return [ServerPort(self.port, "test.port")]

    @property
    def version(self) -> str:
        return "test"

    @property
    def data_location(self) -> str:
        return str(self.home)

    def command(self) -> list[str]:
        return [sys.executable, "-c", _SERVER, str(self.port)]

    def ready(self) -> bool:
        try:
            socket.create_connection((LOOPBACK, self.port), timeout=0.5).close()
        except OSError:
            return False
        return True


def test_stop_waits_for_the_ports_and_a_start_right_after_succeeds(tmp_path: Path) -> None:
    server = _Lingering(tmp_path, free_port())
    server.start()
    first = server.pid()
    assert first is not None and port_in_use(server.port, LOOPBACK)
    server.stop()
    assert not port_in_use(server.port, LOOPBACK)  # the child's 1.5 s have passed
    server.start()  # no "port ... is in use by another program"
    try:
        assert server.pid() not in (None, first)
    finally:
        server.stop()
    assert not port_in_use(server.port, LOOPBACK)
