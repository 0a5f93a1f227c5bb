"""Which IP addresses are not public destinations, and why (for the egress guard)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_V4_COMPAT = ipaddress.ip_network("::/96")


@lru_cache(maxsize=4096)
def blocked_reason(address: Address) -> str | None:
    """Why `address` is not a public destination, or None if it is."""
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    if isinstance(address, ipaddress.IPv6Address):
        reason = _ipv6_reason(address)
        if reason:
            return reason
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "CGNAT shared address space"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    if not address.is_global:
        return "non-public"
    return None


def show_address(address: Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def _ipv6_reason(address: ipaddress.IPv6Address) -> str | None:
    if address.ipv4_mapped is not None:
        return "IPv4-mapped IPv6"
    if address in _V4_COMPAT and int(address) > 1:
        return "IPv4-compatible IPv6"
    if any(address in net for net in _NAT64):
        return "NAT64"
    if address.sixtofour is not None:
        inner = blocked_reason(address.sixtofour)
        return f"6to4 embedding {inner} {address.sixtofour}" if inner else None
    if address.teredo is not None:
        inner = blocked_reason(address.teredo[1])
        return f"Teredo embedding {inner} {address.teredo[1]}" if inner else None
    return None
