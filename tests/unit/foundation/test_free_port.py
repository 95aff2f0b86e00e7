"""``free_port``: ports outside the kernel's ephemeral range, never handed out twice at once."""

from __future__ import annotations

import socket
from concurrent.futures import ProcessPoolExecutor

from helpers import proc


def _pick_ports(count: int) -> list[int]:
    return [proc.free_port() for _ in range(count)]


def test_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    low, _high = proc._ephemeral_range()
    for port in _pick_ports(20):
        assert proc._FREE_PORT_LOW <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_processes_picking_at_once_get_distinct_ports() -> None:
    with ProcessPoolExecutor(max_workers=4) as pool:
        picks = [port for ports in pool.map(_pick_ports, [50] * 4) for port in ports]
    assert len(picks) == len(set(picks)) == 200


def test_a_held_port_is_not_handed_out(monkeypatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        choices = iter([taken, taken, 23456 if taken != 23456 else 23457])
        monkeypatch.setattr(proc.random.SystemRandom, "randrange", lambda self, a, b: next(choices))
        monkeypatch.setattr(proc, "_ephemeral_range", lambda: (taken + 1, 60999))
        monkeypatch.setattr(proc, "_reserve", lambda port: True)
        assert proc.free_port() != taken
