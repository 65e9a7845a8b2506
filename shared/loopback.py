"""Whether a host name or address is this machine's loopback (127.0.0.0/8, ::1, localhost).

Used wherever a setting may only point at this machine: the local stack's bind addresses and the
tracing exporter's endpoint (traces name documents and must not leave the machine by accident).
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback IPv4/IPv6 address; False for anything else,
    including names that would need a DNS lookup."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
