"""Listeners: Kafka's ``listeners`` / ``advertised.listeners`` / ``listener.security.protocol.map``.

``listeners`` is a comma-separated list of ``NAME://host:port``: ``PLAINTEXT://127.0.0.1:9092``,
``INTERNAL://[::1]:9093``, ``PLAINTEXT://:9092`` (empty host: every interface). Names and ports
are unique (one port may serve an IPv4 and an IPv6 listener), each name maps to a security
protocol. Binding follows what a JVM broker does for the same host:

- an IP literal binds that address (``::`` is dual-stack, as Java's wildcard is);
- an empty host binds every interface (IPv4 and IPv6);
- a host name binds every address it resolves to, all on one port, so ``localhost`` serves
  clients that resolve it to ``127.0.0.1`` and those that resolve it to ``::1``.

Metadata answers with the advertised endpoint of the listener the client came in through
(Kafka's rule); without ``advertised.listeners`` that is the listener's own host and bound port
(a wildcard host is advertised as loopback, where Kafka would refuse to start).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kafka_sidecar.storage.log_config import ConfigError

DEFAULT_PROTOCOL_MAP = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
# Every Kafka security protocol: TLS and SASL are set up per listener by server/security.
SUPPORTED_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
# Kafka's EndPoint.uriParseExp: NAME://[host]:port, host possibly in brackets.
_URI = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
_WILDCARDS = {"", "0.0.0.0", "::"}


class ListenerError(OSError):
    """A listener could not be bound; the message names it."""


@dataclass(frozen=True)
class Endpoint:
    name: str  # listener name, upper case (Kafka's ListenerName.normalised)
    host: str  # "" = every interface
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def address(self) -> str:
        """``host:port`` with IPv6 hosts in brackets."""
        return f"{bracket(self.host)}:{self.port}"

    def uri(self) -> str:
        return f"{self.name}://{self.address}"


def bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def is_wildcard(host: str) -> bool:
    return host in _WILDCARDS


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host.split("%")[0]), ipaddress.IPv6Address)
    except ValueError:
        return False


def _is_ipv4(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv4Address)
    except ValueError:
        return False


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (Kafka's default when empty)."""
    if not value:
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(f"Invalid value {value} for configuration listener.security.protocol.map: "
                              f"entries must be NAME:PROTOCOL, got {item!r}")
        name, proto = name.strip().upper(), proto.strip().upper()
        if proto not in DEFAULT_PROTOCOL_MAP:
            raise ConfigError(f"Invalid value {value} for configuration listener.security.protocol.map: "
                              f"unknown security protocol {proto} (one of {', '.join(DEFAULT_PROTOCOL_MAP)})")
        if name in out:
            raise ConfigError(f"Invalid value {value} for configuration listener.security.protocol.map: "
                              f"listener {name} appears more than once")
        out[name] = proto
    return out


def parse_listeners(value: str, config_name: str, protocol_map: dict[str, str]) -> list[Endpoint]:
    """Kafka's listener list parsing (CoreUtils.listenerListToEndPoints), with its checks."""
    endpoints: list[Endpoint] = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = _URI.match(item)
        if m is None:
            raise ConfigError(f"Invalid value {value} for configuration {config_name}: "
                              f"Unable to parse {item} to a broker endpoint (expected NAME://host:port)")
        name, host, port_text = m.group(1).strip().upper(), m.group(2), m.group(3)
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {value} for configuration {config_name}: port {port} of {item} is not in 0..65535")
        if name not in protocol_map:
            raise ConfigError(f"Invalid value {value} for configuration {config_name}: No security protocol defined for "
                              f"listener {name} (add it to listener.security.protocol.map)")
        endpoints.append(Endpoint(name, host, port, protocol_map[name]))
    if not endpoints:
        raise ConfigError(f"Invalid value {value} for configuration {config_name}: no listener given")
    names = [e.name for e in endpoints]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"Invalid value {value} for configuration {config_name}: Each listener must have a different name, "
                          f"listeners: {value}")
    if config_name == "listeners":
        # Kafka: ports unique unless one listener is IPv4 and the other IPv6 (port 0: each its own).
        for i, a in enumerate(endpoints):
            for b in endpoints[i + 1:]:
                if a.port == b.port and a.port != 0:
                    split_stack = (_is_ipv4(a.host) and _is_ipv6(b.host)) or (_is_ipv6(a.host) and _is_ipv4(b.host))
                    if not split_stack:
                        raise ConfigError(f"Invalid value {value} for configuration {config_name}: Each listener must have a "
                                          f"different port unless exactly one listener has an IPv4 address and the other "
                                          f"IPv6 address, listeners: {value}")
    return endpoints


@dataclass
class ListenerSettings:
    listeners: list[Endpoint]
    advertised: dict[str, Endpoint]  # by listener name, only those given in advertised.listeners
    source: str  # where ``listeners`` came from (for messages)


def resolve_listeners(listeners: str, advertised: str | None, protocol_map: str | None, source: str = "") -> ListenerSettings:
    """Validate the three settings together; ConfigError with Kafka-like wording."""
    pmap = parse_protocol_map(protocol_map)
    eps = parse_listeners(listeners, "listeners", pmap)
    adv: dict[str, Endpoint] = {}
    if advertised:
        names = {e.name for e in eps}
        for a in parse_listeners(advertised, "advertised.listeners", pmap):
            if a.name not in names:
                raise ConfigError(f"Invalid value {advertised} for configuration advertised.listeners: advertised.listeners "
                                  f"listener names must be equal to or a subset of the ones defined in listeners. "
                                  f"Found {a.name}. The valid options based on the current configuration are "
                                  f"{','.join(sorted(names))}")
            if a.host == "0.0.0.0":
                raise ConfigError(f"Invalid value {advertised} for configuration advertised.listeners: advertised.listeners "
                                  f"cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.")
            adv[a.name] = a
    for e in eps:
        if e.security_protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(f"listener {e.uri()}: security protocol {e.security_protocol} is not supported "
                              f"by kafka-sidecar (only {', '.join(sorted(SUPPORTED_PROTOCOLS))})")
    return ListenerSettings(eps, adv, source)


# ---- binding ------------------------------------------------------------------------------


def _bind_addresses(host: str, port: int) -> list[tuple[int, tuple]]:
    """(family, sockaddr) pairs to bind for a listener host, in bind order."""
    if host == "":
        return [(socket.AF_INET, ("0.0.0.0", port)), (socket.AF_INET6, ("::", port, 0, 0))]
    if host.lower() == "localhost":
        # Both loopbacks, whatever /etc/hosts says: clients resolve localhost to either.
        return [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    seen: set[tuple] = set()
    out: list[tuple[int, tuple]] = []
    for family, _type, _proto, _canon, addr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        key = (family, addr[0])
        if key not in seen:
            seen.add(key)
            out.append((family, addr))
    # IPv4 first, so a port picked by the kernel (port 0) comes from the more common stack.
    out.sort(key=lambda fa: 0 if fa[0] == socket.AF_INET else 1)
    return out


def _make_socket(family: int, addr: tuple, dual_stack: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual_stack else 1)
        sock.bind(addr)
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


_SKIPPABLE = {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT}


def bind_sockets(host: str, port: int, attempts: int = 20) -> list[socket.socket]:
    """Listening sockets for ``host:port``, all on one port (chosen by the kernel for port 0).

    Addresses of a family the machine lacks (no IPv6) are skipped when another one binds.
    Raises OSError when nothing can be bound.
    """
    addrs = _bind_addresses(host, port)
    if not addrs:
        raise OSError(errno.EADDRNOTAVAIL, f"{host} resolves to no IP address")
    single_v6_wildcard = host == "::"
    for _ in range(attempts):  # bounded: a port picked for the first address may be taken for the next
        socks: list[socket.socket] = []
        chosen = port
        retry = False
        try:
            for family, addr in addrs:
                addr = (addr[0], chosen, *addr[2:])
                try:
                    s = _make_socket(family, addr, dual_stack=single_v6_wildcard)
                except OSError as e:
                    if e.errno in _SKIPPABLE and len(addrs) > 1:
                        continue
                    if e.errno == errno.EADDRINUSE and port == 0 and socks:
                        retry = True
                        break
                    raise
                socks.append(s)
                chosen = s.getsockname()[1]
        except BaseException:
            for s in socks:
                s.close()
            raise
        if retry:
            for s in socks:
                s.close()
            continue
        if not socks:
            raise OSError(errno.EADDRNOTAVAIL, f"cannot bind any address of {host}")
        return socks
    raise OSError(errno.EADDRINUSE, f"no free port for every address of {host}")


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def start_listener(endpoint: Endpoint, handler: Handler, limit: int = 1 << 20,
                         socks: list[socket.socket] | None = None) -> tuple[list[asyncio.base_events.Server], int]:
    """Serve ``handler`` on every socket of ``endpoint`` (bound here, or ``socks`` already
    bound: a cluster node's, from its supervisor); returns (servers, bound port)."""
    socks = socks or bind_sockets(endpoint.host, endpoint.port)
    servers = []
    try:
        for s in socks:
            servers.append(await asyncio.start_server(handler, sock=s, limit=limit))
    except BaseException:
        for srv in servers:
            srv.close()
        for s in socks:
            s.close()
        raise
    return servers, socks[0].getsockname()[1]


def advertised_host_for(host: str) -> str:
    """The host to advertise for a bound listener host (a wildcard becomes loopback)."""
    return "127.0.0.1" if is_wildcard(host) else host
