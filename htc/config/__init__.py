"""HTCondor's configuration language and htc's param table.

The API other parts of htc use::

    from htc.config import load_config

    cfg = load_config("SCHEDD")            # as the schedd sees it: SCHEDD.X beats X
    cfg.param("MAX_JOBS_RUNNING")          # typed, declared in htc.config.params
    cfg.get("MY_MACRO")                    # any macro, expanded (None if undefined)
    cfg.where("SPOOL")                     # (file, line) | "default" | "environment" | "detected"

Modules: :mod:`~htc.config.parser` (lines and statements), :mod:`~htc.config.conditions`
(if/elif/else), :mod:`~htc.config.macros` (lazy ``$(...)`` expansion),
:mod:`~htc.config.metaknobs` (``use ROLE/POLICY/FEATURE/SECURITY``),
:mod:`~htc.config.loader` (sources and their order), :mod:`~htc.config.params` (THE param
table), :mod:`~htc.config.home` (``$HTC_HOME``), :mod:`~htc.config.config` (:class:`Config`).
"""

from htc.config.config import ENV_CONFIG, Config, load_config
from htc.config.errors import ConfigError, UndeclaredKnob
from htc.config.home import ensure_home, htc_home
from htc.config.macros import Origin
from htc.config.params import PARAMS, Param

__all__ = ["Config", "ConfigError", "ENV_CONFIG", "Origin", "PARAMS", "Param", "UndeclaredKnob",
           "ensure_home", "htc_home", "load_config"]
