"""The :class:`Config` object and :func:`load_config`, the one way htc reads configuration.

``load_config("SCHEDD")`` reads the sources in HTCondor's order and returns a
:class:`Config` that answers as the schedd would: ``SCHEDD.X`` beats ``X``. Values are
expanded when read, never before. Code reads knobs with :meth:`Config.param` (typed, declared
in :mod:`htc.config.params`); tools that show arbitrary macros use :meth:`Config.get`.

Where the main file comes from:

* ``HTC_CONFIG=/path/file`` -- that file (it must exist);
* ``HTC_CONFIG=ONLY_ENV`` -- no file at all: param-table defaults and ``_HTC_`` overrides;
* otherwise ``$HTC_HOME/htc_config``, created with a personal-pool setup on first use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from htc.config import detected, params
from htc.config.errors import ConfigError, UndeclaredKnob
from htc.config.execute import DEFAULT_EXECUTE, execute_default
from htc.config.evaluate import to_bool, to_float, to_int
from htc.config.home import ensure_home
from htc.config.loader import Loader
from htc.config.macros import Context, Entry, Expander, MacroError, MacroSet, Origin

__all__ = ["Config", "load_config", "ENV_CONFIG"]

#: environment variable naming the main configuration file (HTCondor's CONDOR_CONFIG)
ENV_CONFIG = "HTC_CONFIG"


class Config:
    """A loaded configuration, seen by one subsystem (and local name)."""

    def __init__(self, macros: MacroSet, ctx: Context, *, files: list[str], warnings: list[str]):
        self._macros = macros
        self._ctx = ctx
        self._x = Expander(macros, ctx)
        #: configuration sources in load order (main file first)
        self.files = list(files)
        #: non-fatal problems found while reading (``file:line: warning: ...``)
        self.warnings = list(warnings)

    @property
    def subsystem(self) -> str:
        """The subsystem this configuration answers for (``TOOL`` for command-line tools)."""
        return self._ctx.subsys or "TOOL"

    @property
    def local_name(self) -> str | None:
        """The daemon's local name (``-local-name``), if any."""
        return self._ctx.localname

    # -- raw access ----------------------------------------------------------------------
    def _lookup(self, name: str) -> tuple[str | None, Entry | None]:
        return self._x.lookup_entry(name)

    def raw(self, name: str) -> str | None:
        """The unexpanded value of ``name`` as this subsystem sees it, or None if undefined."""
        return self._lookup(name)[0]

    def origin(self, name: str) -> Origin | None:
        """Where ``name``'s value comes from (file and line, default, environment, detected)."""
        raw, entry = self._lookup(name)
        if entry is not None:
            return entry.origin
        if raw is not None or params.lookup(name) is not None:
            return Origin("default")
        return None

    def where(self, name: str) -> tuple[str, int] | str | None:
        """``(file, line)`` of the definition, or ``"default"``/``"environment"``/``"detected"``.

        Returns None when ``name`` is neither defined nor declared.
        """
        origin = self.origin(name)
        if origin is None:
            return None
        if origin.kind == "file":
            return origin.file or "", origin.line or 0
        return origin.kind

    def names(self) -> list[str]:
        """Every name defined by a source (files, templates, environment, detection), sorted."""
        return sorted((e.name for e in self._macros), key=str.upper)

    def entries(self) -> list[Entry]:
        """The definitions in the order they were first made."""
        return list(self._macros)

    def default(self, name: str) -> str | None:
        """The param table's raw default of a declared knob, or None if it is not declared."""
        p = params.lookup(name)
        return p.default if p is not None else None

    # -- expansion -----------------------------------------------------------------------
    def _fail(self, name: str, entry: Entry | None, message: str) -> ConfigError:
        origin = entry.origin if entry is not None else None
        if origin is not None and origin.kind == "file":
            where = f" (from use {origin.use})" if origin.use else ""
            return ConfigError(f"{name}{where}: {message}", file=origin.file, line=origin.line,
                               hint="fix the value")
        if origin is not None and origin.kind == "environment":
            return ConfigError(f"{name} (set by the environment variable {origin.file}): {message}",
                               hint=f"fix or unset {origin.file}")
        return ConfigError(f"{name}: {message}", hint="fix the configuration")

    def expand(self, text: str, *, name: str = "<text>") -> str:
        """Expand every macro in ``text`` with this configuration.

        Raises:
            ConfigError: a macro function failed or the references form a cycle.
        """
        try:
            return self._x.expand(text)
        except MacroError as exc:
            raise self._fail(name, None, str(exc)) from None

    def _expanded(self, name: str) -> tuple[str, Entry | None]:
        raw, entry = self._lookup(name)
        if not raw:
            return "", entry
        try:
            return self._x.expand(raw), entry
        except MacroError as exc:
            raise self._fail(name, entry, str(exc)) from None

    def get(self, name: str) -> str | None:
        """The expanded value of any macro, or None if undefined or empty (HTCondor's ``param``).

        Raises:
            ConfigError: expanding the value failed (the message names its file and line).
        """
        value, _entry = self._expanded(name)
        return value or None

    def undefined_references(self, name: str) -> list[str]:
        """Macros that expanding ``name`` referenced but that are defined nowhere (they expand empty)."""
        self._x.undefined = []
        self._expanded(name)
        seen: list[str] = []
        for ref in self._x.undefined:
            if ref.upper() not in (s.upper() for s in seen):
                seen.append(ref)
        return seen

    # -- typed access for code -----------------------------------------------------------
    def param(self, name: str):
        """The typed value of a knob declared in the param table.

        Returns:
            ``int``/``float``/``bool`` (None if unset with no default), ``str`` for ``str``,
            ``path`` and ``expr`` knobs (``""`` when unset), ``list[str]`` for ``list`` knobs.

        Raises:
            UndeclaredKnob: ``name`` is not in :mod:`htc.config.params` (a bug in the caller).
            ConfigError: the configured value is not of the knob's type.
        """
        p = params.lookup(name)
        if p is None:
            raise UndeclaredKnob(name)
        text, entry = self._expanded(name)
        from_default = not text.strip()
        if from_default and not p.in_table and p.default:
            try:
                text = self._x.expand(p.default)
            except MacroError as exc:
                raise self._fail(name, None, str(exc)) from None
        if p.type in ("str", "path", "expr"):
            return text
        if p.type == "list":
            return [item for item in re.split(r"[,\s]+", text) if item]
        if not text.strip():
            if from_default and p.default and p.in_table:
                text = self.expand(p.default, name=name)
            if not text.strip():
                return None
        value = self._convert(p, text)
        if value is None:
            raise self._fail(name, entry, f"{text.strip()!r} is not a valid {p.type} "
                             f"(the default is {p.default or 'unset'})")
        return value

    @staticmethod
    def _convert(p: params.Param, text: str):
        if p.type == "int":
            return to_int(text)
        if p.type == "float":
            return to_float(text)
        value, clean = to_bool(text)
        return value if clean else None

    def __repr__(self) -> str:
        return f"<Config subsystem={self.subsystem} files={self.files!r}>"


def load_config(subsystem: str | None = None, *, env: Mapping[str, str] | None = None,
                local_name: str | None = None) -> Config:
    """Read the configuration as ``subsystem`` (``SCHEDD``, ``STARTD``, ...; None: a tool).

    Args:
        subsystem: the daemon reading; ``SUBSYS.X`` definitions win over ``X`` for it.
        env: the environment (default ``os.environ``): ``HTC_CONFIG``, ``HTC_HOME``,
            ``_HTC_NAME`` overrides and ``$ENV()`` lookups all come from it.
        local_name: the daemon's local name; ``LOCALNAME.X`` beats ``SUBSYS.X``.

    Returns:
        The loaded :class:`Config`.

    Raises:
        ConfigError: a source is missing or malformed; the message names file and line.
    """
    env = dict(os.environ if env is None else env)
    subsys = (subsystem or "TOOL").upper()
    macros = MacroSet()
    ctx = Context(subsys=subsys, localname=local_name, env=env, defaults=params.table_default)
    expander = Expander(macros, ctx)
    loader = Loader(macros, expander)

    found = detected.detect(subsys, local_name, env)
    for name, value in found.items():
        if name not in detected.REINSERTED_AFTER_ROOT or name == "TILDE":
            macros.set(name, value, Origin("detected"))

    setting = env.get(ENV_CONFIG)
    only_env = setting is not None and setting.strip().upper() == "ONLY_ENV"
    if setting is None or not setting.strip():
        root: str | None = ensure_home(env)
    elif only_env:
        root = None
    else:
        root = setting
        if not os.path.exists(root):
            raise ConfigError(f"{ENV_CONFIG} names {root}, which does not exist",
                              hint=f"point {ENV_CONFIG} at a configuration file, set it to ONLY_ENV, "
                                   "or unset it to use $HTC_HOME/htc_config")
        if os.path.isdir(root):
            raise ConfigError(f"{ENV_CONFIG} names {root}, which is a directory",
                              hint=f"point {ENV_CONFIG} at a file")
    if root is not None and root != "/dev/null":
        macros.set("CONFIG_ROOT", os.path.dirname(root) or ".", Origin("detected"))
        loader.read_file(root, purpose="main configuration file")

    for name in detected.REINSERTED_AFTER_ROOT:
        if name in found:
            macros.set(name, found[name], Origin("detected"))
    try:
        loader.read_locals(only_env)
    except MacroError as exc:
        raise ConfigError(f"while reading local configuration: {exc}",
                          hint="fix LOCAL_CONFIG_DIR / LOCAL_CONFIG_FILE") from None
    loader.apply_environment(env)
    for name in detected.SPECIALS:
        if name in found:
            macros.set(name, found[name], Origin("detected"))
    config = Config(macros, ctx, files=loader.files, warnings=loader.warnings)
    raw = config.raw("EXECUTE")
    if raw is None or raw.strip() in ("", DEFAULT_EXECUTE):  # left at its default (a generated file writes it)
        # EXECUTE says where jobs really run: root's jobs cannot reach $(LOCAL_DIR)/execute
        # under /root (htc.config.execute)
        shared = execute_default(config.param("EXECUTE"), detected.htc_home_path(env))
        if shared is not None:
            macros.set("EXECUTE", shared, Origin("detected"))
    return config
