"""This host's one name, as HTCondor finds it, for every daemon and tool.

HTCondor computes its host name once (``init_local_hostname`` in ipv6_hostname.cpp) and every
daemon uses it: the schedd's and the startd's ``Machine`` and default names (``schedd@<host>``,
``slot1@<host>``), the collector's and negotiator's, ``$(FULL_HOSTNAME)``. It is

1. ``NETWORK_HOSTNAME`` when the configuration sets it;
2. else the system's host name (``gethostname``), resolved with ``getaddrinfo(AI_CANONNAME)``:
   of the canonical names found, one with a dot (a domain) is preferred, then one of a
   non-loopback address; a name that cannot be resolved stays as it is;
3. ``DEFAULT_DOMAIN_NAME`` appended when the result has no dot.

``socket.getfqdn()``, which several daemons used before, answers the *first* name of the
address's ``/etc/hosts`` line instead (often ``localhost``), so the schedd and the slots of one
host could disagree. :func:`full_hostname` is the one function they all call now.

:func:`daemon_name` names a daemon as HTCondor's ``build_valid_daemon_name`` does: by default
the host's full name (``submit.example.com``: a schedd's ``Name``, the ``@host`` of ``slot1@host``);
``SCHEDD_NAME = alt`` or ``STARTD_NAME = alt`` gives ``alt@submit.example.com``, so two daemons of
one kind on one host (two startds: ``slot1@host`` and ``slot1@alt@host``) do not collide; a name
with its own ``@`` is taken as it is.

:func:`sinful` forms the address HTCondor writes for a daemon (a "sinful string",
``<ip:port?addrs=ip-port&alias=host&sock=name>``, as in the user log's ``Job submitted from
host:``). htc's daemons are reached through named sockets, not TCP ports: the port is 0 and
``sock=`` names the daemon's socket, as HTCondor's shared port names a daemon behind its port.
"""

from __future__ import annotations

import functools
import ipaddress
import socket

__all__ = ["daemon_name", "full_hostname", "host_names", "local_ip", "sinful"]


def _declared(config, knob: str) -> str:
    if config is None:
        return ""
    try:
        return str(config.param(knob) or "").strip()
    except Exception:  # not declared in this configuration's table
        return ""


@functools.lru_cache(maxsize=8)
def host_names(network_hostname: str = "", default_domain: str = "") -> tuple[str, str]:
    """``(short, full)`` names of this host by HTCondor's rules (see the module's docstring)."""
    if network_hostname:
        name = network_hostname
    else:
        name = socket.gethostname() or "localhost"
        best = -1
        try:
            infos = socket.getaddrinfo(name, None, flags=socket.AI_CANONNAME)
        except OSError:
            infos = []
        for family, _, _, canon, addr in infos:
            if not canon:
                continue
            try:
                loopback = ipaddress.ip_address(addr[0]).is_loopback
            except ValueError:
                loopback = True
            score = (0 if loopback else 10) + (100 if "." in canon else 0) + (1 if family == socket.AF_INET else 0)
            if score > best:
                best, name = score, canon
    if "." not in name and default_domain:
        name = f"{name}.{default_domain.lstrip('.')}"
    return name.split(".", 1)[0], name


def full_hostname(config=None) -> str:
    """This host's full name (HTCondor's ``get_local_fqdn``), honouring ``NETWORK_HOSTNAME``
    and ``DEFAULT_DOMAIN_NAME`` of ``config`` when given."""
    return host_names(_declared(config, "NETWORK_HOSTNAME"), _declared(config, "DEFAULT_DOMAIN_NAME"))[1]


def daemon_name(configured: object, host: str) -> str:
    """The name of a daemon whose ``<SUBSYS>_NAME`` knob is ``configured``, on host ``host``
    (HTCondor's ``build_valid_daemon_name``: see the module's docstring)."""
    name = str(configured or "").strip()
    if not name or name.lower() == host.lower():  # (the host's own name: just the host, as HTCondor)
        return host
    return name if "@" in name else f"{name}@{host}"


@functools.lru_cache(maxsize=1)
def local_ip() -> str:
    """The address of the interface this host reaches others through (127.0.0.1 without one)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("192.0.2.1", 9))  # TEST-NET address: picks the outgoing interface, sends nothing
            return sock.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def sinful(address: str, alias: str = "") -> str:
    """HTCondor's address string for the daemon of this host whose socket is ``address``
    (``alias``: this host's name, by default :func:`full_hostname`)."""
    if address.startswith("<"):
        return address  # a daemon behind a shared port already has its sinful string
    ip = local_ip()
    alias = alias or full_hostname()
    return f"<{ip}:0?addrs={ip}-0&alias={alias}&noUDP&sock={address}>"
