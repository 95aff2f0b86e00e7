"""What processes listen on, for the integration tests' loopback checks (psutil's view of the
kernel's socket tables, rather than parsing ``ss`` or ``/proc/net/tcp*``)."""

from __future__ import annotations

import ipaddress

import psutil


def _plain(address: str) -> str:
    """An IPv4-mapped IPv6 address (a JVM's socket bound to 127.0.0.1) as its IPv4 form."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped) if mapped is not None else str(ip)


def listening(*pids: int) -> set[tuple[str, int]]:
    """``(address, port)`` of the TCP sockets in LISTEN state that the processes ``pids`` hold."""
    found: set[tuple[str, int]] = set()
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN:
                found.add((_plain(conn.laddr.ip), conn.laddr.port))
    return found


def listeners_on(port: int) -> list[str]:
    """Addresses any process listens on at TCP ``port`` (empty: nothing listens there)."""
    return sorted(
        _plain(c.laddr.ip)
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    )
