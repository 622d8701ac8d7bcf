"""Daemon addresses: a local name, or a daemon on another host behind its shared port.

Theory of operation
-------------------
On one host a daemon is reached by *name* (``"schedd"``, ``"collector"``): the local transport
maps the name to a Unix socket under ``$HTC_HOME/sockets``. Across hosts every host listens on
one port (HTCondor's shared port, 9618 by default) and routes each incoming channel to the daemon
it names. Such an address is written as HTCondor writes it in ``MyAddress`` -- a *sinful string*:

    <10.200.0.3:9618?sock=schedd>

``sock`` names the daemon behind the shared port; without it the address is the host's collector
(HTCondor's central manager is reached as ``<cm:9618>``). Other ``key=value`` parameters that
HTCondor puts there (``addrs``, ``alias``, ``noUDP``) are kept and ignored. A bare ``HOST[:PORT]``
-- what users give to ``-pool`` or ``CONDOR_HOST`` -- reads as the collector on that host's port.

Nothing here does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from htc.wire.errors import BadAddress

__all__ = ["DEFAULT_PORT", "RemoteAddress", "format_remote", "is_remote", "parse_host_port",
           "parse_remote"]

#: HTCondor's well-known port: the collector's, and the shared port's
DEFAULT_PORT = 9618

_SINFUL = re.compile(r"<(?P<host>\[[0-9A-Fa-f:.]+\]|[^:?>\s]+)(?::(?P<port>\d+))?(?:\?(?P<params>[^>]*))?>\Z")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*\Z")


@dataclass(frozen=True)
class RemoteAddress:
    """A daemon on another host: the host, its shared port, and the daemon's name there."""

    host: str
    port: int
    name: str = "collector"

    def __str__(self) -> str:
        return format_remote(self.host, self.port, self.name)

    @property
    def endpoint(self) -> tuple[str, int]:
        """``(host, port)``: what to connect to."""
        return self.host, self.port


def _check_port(text: str, port: int) -> int:
    if not 0 < port < 65536:
        raise BadAddress(f"address {text!r}: port {port} is outside 1-65535")
    return port


def _check_name(text: str, name: str) -> str:
    if not _NAME.match(name):
        raise BadAddress(f"address {text!r}: {name!r} is not a daemon name "
                         "(letters, digits and _ . @ + -, starting with a letter or digit)")
    return name


def is_remote(address: str) -> bool:
    """Whether ``address`` is a sinful string (a daemon behind some host's shared port)."""
    return address.startswith("<")


def parse_remote(address: str) -> RemoteAddress:
    """Read a sinful string ``<HOST[:PORT][?sock=NAME&...]>``.

    Raises:
        BadAddress: the text is not one; the message quotes it and says what is wrong.
    """
    found = _SINFUL.match(address.strip())
    if not found:
        raise BadAddress(f"address {address!r} is not of the form <HOST:PORT?sock=NAME>")
    host = found["host"].strip("[]")
    port = _check_port(address, int(found["port"])) if found["port"] else DEFAULT_PORT
    name = "collector"
    for part in filter(None, (found["params"] or "").split("&")):
        key, _, value = part.partition("=")
        if key == "sock":
            name = _check_name(address, value)
    return RemoteAddress(host, port, name)


def parse_host_port(text: str, *, name: str = "collector") -> RemoteAddress:
    """Read ``HOST[:PORT]`` (or a sinful string) as given to ``-pool`` or ``CONDOR_HOST``.

    ``name`` is the daemon meant when the text names only a host (the collector by default).

    Raises:
        BadAddress: empty text, a bad port, or a malformed sinful string.
    """
    text = text.strip()
    if is_remote(text):
        return parse_remote(text)
    if not text:
        raise BadAddress("an empty host name was given where HOST[:PORT] is needed")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        raise BadAddress(f"address {text!r} has no host before the port")
    if port_text and not port_text.isdigit():
        raise BadAddress(f"address {text!r}: port {port_text!r} is not a number")
    port = _check_port(text, int(port_text)) if port_text else DEFAULT_PORT
    return RemoteAddress(host, port, _check_name(text, name))


def format_remote(host: str, port: int, name: str = "collector") -> str:
    """The sinful string of daemon ``name`` behind ``host:port`` (``<10.0.0.1:9618?sock=schedd>``)."""
    shown = f"[{host}]" if ":" in host else host
    if name == "collector":
        return f"<{shown}:{port}>"
    return f"<{shown}:{port}?sock={name}>"
