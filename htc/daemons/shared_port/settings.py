"""The shared port's settings: each field names the knob it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons.settings import knob


def interface(value: object) -> str:
    """NETWORK_INTERFACE: ``*`` (or empty) means every interface, else the address to bind."""
    text = str(value or "").strip()
    return "" if text in ("", "*") else text


def cipher_list(value: object) -> tuple[str, ...]:
    """SSH_CIPHERS as a tuple of names, in order of preference."""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return tuple(str(v) for v in (value or ()))


@dataclass(frozen=True)
class SharedPortSettings:
    """What the shared port needs from the configuration."""

    port: int = knob("SHARED_PORT_PORT", 9618)
    interface: str = knob("NETWORK_INTERFACE", "", convert=interface)
    keepalive_interval: float = knob("SSH_KEEPALIVE_INTERVAL", 15.0)
    keepalive_count_max: int = knob("SSH_KEEPALIVE_COUNT_MAX", 3)
    login_timeout: float = knob("SSH_CONNECT_TIMEOUT", 20.0)
    ciphers: tuple[str, ...] = knob("SSH_CIPHERS", (), convert=cipher_list)
    pool_key_file: str = knob("SEC_TOKEN_POOL_SIGNING_KEY_FILE", "")
    trust_domain: str = knob("TRUST_DOMAIN", "")
    authorized_keys: str = knob("SHARED_PORT_AUTHORIZED_KEYS", "")
    #: flocking (htc.daemons.schedd.flock): the daemons of another pool sharing the pool key are
    #: let in as ``condor_pool@THEIR_TRUST_DOMAIN`` when either list is set
    flock_from: tuple[str, ...] = knob("FLOCK_FROM", (), convert=cipher_list)
    flock_to: tuple[str, ...] = knob("FLOCK_TO", (), convert=cipher_list)
