"""The collector's settings: each field names the HTCondor knob it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from htc.config.hostname import full_hostname
from htc.daemons.settings import knob


def collector_name(value: object) -> str:
    """COLLECTOR_NAME, else ``collector@<host>``."""
    return str(value or f"collector@{full_hostname()}")


@dataclass(frozen=True)
class CollectorSettings:
    """What the collector core needs from the configuration (names are HTCondor's knobs)."""

    name: str = knob("COLLECTOR_NAME", "collector", convert=collector_name)  # the Name of its own ad
    address: str = "collector"          # where daemons and tools reach it
    machine: str = "localhost"          # the host it runs on
    classad_lifetime: float = knob("CLASSAD_LIFETIME", 900.0)
    update_interval: float = knob("COLLECTOR_UPDATE_INTERVAL", 900.0)
    pid: int = 0
