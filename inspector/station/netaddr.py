"""Network addresses: which ones only this machine can reach.

The station serves its metrics, console and OPC UA endpoints without a password
only on loopback; each of those checks asks :func:`is_loopback`.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
