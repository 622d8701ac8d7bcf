"""Reading configuration sources into a macro table: statements, includes, metaknobs, locals.

Theory of operation
-------------------
:class:`Loader` executes the statements of one source after another, as HTCondor's
``Parse_macros`` does, against a :class:`~htc.config.macros.MacroSet`:

* conditionals are decided *while reading*, with the values defined so far;
* ``NAME = value`` stores the raw value after expanding only references to ``NAME`` itself;
* ``include`` reads another file (or a command's output) at that point;
* ``use CATEGORY : Template(args)`` reads the template's statements at that point, with its
  meta arguments substituted; the definitions it makes remember the ``use`` line;
* ``error :`` stops with an error, ``warning :`` records a warning.

The order of sources (:meth:`Loader.read_locals`) is HTCondor's: the main file, then every
file of the ``LOCAL_CONFIG_DIR`` directories (name order, skipping
``LOCAL_CONFIG_DIR_EXCLUDE_REGEXP``), then the ``LOCAL_CONFIG_FILE`` list (re-read if a file
changes the list), then ``LOCAL_CONFIG_DIR`` again if a local file changed it. Environment
overrides come last (:meth:`Loader.apply_environment`). Every error names the file and line.

Safety (:mod:`htc.config.safety`): a daemon (any subsystem but TOOL and SUBMIT) reads only
files, and LOCAL_CONFIG_DIR directories, that nobody but root and its own account can change,
up to ``/``; any reader runs the command of an ``include command`` line or of a
``LOCAL_CONFIG_FILE`` ending in ``|`` only when the file that asks for it, and the program,
pass the same test. Otherwise it stops with an error naming the path and why.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from htc.config import metaknobs, params
from htc.config.conditions import ConditionError, IfStack, test_condition
from htc.config.errors import ConfigError
from htc.config.evaluate import to_bool
from htc.config.macros import IDCHARS, Expander, MacroError, MacroSet, Origin
from htc.config.safety import unsafe_reason
from htc.config.parser import (Line, Statement, StatementError, logical_lines, parse_include_options,
                               parse_statement, split_use, template_lines)

__all__ = ["Loader", "ENV_PREFIX"]

#: prefix of environment overrides, matched case-insensitively (HTCondor's is ``_CONDOR_``)
ENV_PREFIX = "_HTC_"
MAX_DEPTH = 20
_COLON_IF = re.compile(r":if(\s|$)", re.I)


@dataclass
class _Source:
    file: str                 # the file (for templates: the file of the use statement)
    depth: int
    use: str | None = None    # "ROLE:Personal" inside a template
    use_line: int = 0         # line of the use statement in ``file``
    chain: tuple[str, ...] = ()

    @property
    def template(self) -> bool:
        """Whether this source is a metaknob template."""
        return self.use is not None


@dataclass
class _HereDoc:
    name: str
    tag: str
    line: Line
    lines: list[str] = field(default_factory=list)


def _same_value(default: str | None, value: str) -> bool:
    """HTCondor's ``same_param_value``: equal, or the same true/false in another case."""
    if default is None:
        return False
    return default == value or (default.lower() == value.lower() and value.lower() in ("true", "false"))


class Loader:
    """Executes configuration sources against one macro table (see the module docstring)."""

    def __init__(self, macros: MacroSet, expander: Expander):
        self.macros = macros
        self.x = expander
        #: the sources read, in load order (main file first)
        self.files: list[str] = []
        #: non-fatal problems, ``file:line: warning: ...``
        self.warnings: list[str] = []
        #: a daemon reads only files nobody else can change (tools only check command lines)
        self.strict = (expander.ctx.subsys or "TOOL").upper() not in ("TOOL", "SUBMIT")

    def check_safe(self, path: str, what: str, where: tuple[str | None, int | None] = (None, None)) -> None:
        """Refuse ``path`` if others could change it (see :mod:`htc.config.safety`).

        Raises:
            ConfigError: naming the path, why, and how to fix it.
        """
        reason = unsafe_reason(path)
        if reason is not None:
            raise ConfigError(f"refusing {what} {path}: {reason}", file=where[0], line=where[1],
                              hint="htc obeys only configuration that nobody but root and the pool's "
                                   "account can change (docs/security.md)")

    # -- definitions -----------------------------------------------------------------------
    def define(self, name: str, value: str, origin: Origin) -> None:
        """Insert or replace ``name`` (HTCondor's ``insert_macro``: self references expanded)."""
        value = self.x.expand_self(value, name)
        if self.macros.get(name) is None:
            base = name.split(".", 1)[1] if "." in name and params.lookup(name) is None else name
            default = params.table_default(base)
            if _same_value(default, value):
                value = default
        self.macros.set(name, value, origin)

    # -- sources ---------------------------------------------------------------------------
    def read_file(self, path: str, *, required: bool = True, depth: int = 0,
                  purpose: str = "configuration file", hint: str | None = None) -> bool:
        """Read one file. Returns False if it is missing and not required.

        Raises:
            ConfigError: the file is missing (when required) or wrong.
        """
        if self.strict:
            self.check_safe(path, f"to read {purpose}")
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            if not required:
                return False
            raise ConfigError(f"cannot read {purpose} {path}: {exc.strerror}",
                              hint=hint or "check the path and its permissions") from None
        self.files.append(path)
        self.read_text(text, path, depth=depth)
        return True

    def read_text(self, text: str, source: str, *, depth: int = 0) -> None:
        """Execute configuration ``text`` as if read from the file ``source``."""
        self._run(logical_lines(text), _Source(source, depth, chain=(os.path.abspath(source),)))

    def read_locals(self, only_env: bool) -> None:
        """Read LOCAL_CONFIG_DIR files, then LOCAL_CONFIG_FILE files, as HTCondor orders them."""
        dirlist = self.x.expand(self.x.lookup("LOCAL_CONFIG_DIR") or "")
        if dirlist and not only_env:
            self._read_directories(dirlist)
        self._read_local_files()
        newdirlist = self.x.expand(self.x.lookup("LOCAL_CONFIG_DIR") or "")
        if newdirlist and not only_env and newdirlist != dirlist:
            self._read_directories(newdirlist)

    def apply_environment(self, env: Mapping[str, str]) -> None:
        """Apply ``_HTC_NAME=value`` overrides (prefix case-insensitive), after every file."""
        for key, value in env.items():
            if key[:len(ENV_PREFIX)].upper() != ENV_PREFIX:
                continue
            name = key[len(ENV_PREFIX):].rstrip()
            if name:
                self.define(name, value.lstrip(), Origin("environment", file=key))

    def _required_locals(self) -> bool:
        value, _clean = to_bool(self.x.expand(self.x.lookup("REQUIRE_LOCAL_CONFIG_FILE") or "true"))
        return True if value is None else value

    def _read_directories(self, dirlist: str) -> None:
        pattern = self.x.expand(self.x.lookup("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP") or "")
        try:
            exclude = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise ConfigError(f"LOCAL_CONFIG_DIR_EXCLUDE_REGEXP = {pattern!r} is not a valid "
                              f"regular expression ({exc})", hint="fix or remove it") from None
        required = self._required_locals()
        for directory in _split_list(dirlist):
            if self.strict and os.path.isdir(directory):
                self.check_safe(directory, "to read the LOCAL_CONFIG_DIR directory")
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            paths = sorted(os.path.join(directory, n) for n in names
                           if not os.path.isdir(os.path.join(directory, n))
                           and not (exclude and exclude.match(n)))
            for path in paths:
                self.read_file(path, required=required, depth=1, purpose="LOCAL_CONFIG_DIR file")

    def _read_local_files(self) -> None:
        value = self.x.expand(self.x.lookup("LOCAL_CONFIG_FILE") or "")
        if not value:
            return
        todo = [value] if "|" in value else _split_list(value)
        done: list[str] = []
        i = 0
        while i < len(todo):
            source = todo[i]
            if source.rstrip().endswith("|"):
                entry = self.macros.get("LOCAL_CONFIG_FILE")
                origin = entry.origin if entry is not None else None
                where = (origin.file, origin.line) if origin is not None and origin.kind == "file" else (None, None)
                self._read_command(source.rstrip()[:-1], 1, where, "LOCAL_CONFIG_FILE")
            else:
                origin = self.macros.get("LOCAL_CONFIG_FILE")
                named = (f" (named at {origin.origin.describe()})"
                         if origin is not None and origin.origin.kind != "detected" else "")
                self.read_file(source, required=self._required_locals(), depth=1,
                               purpose=f"LOCAL_CONFIG_FILE{named}",
                               hint="create it, fix LOCAL_CONFIG_FILE, or set "
                                    "REQUIRE_LOCAL_CONFIG_FILE = false to skip missing files")
            done.append(source)
            new_value = self.x.expand(self.x.lookup("LOCAL_CONFIG_FILE") or "")
            if new_value and new_value != value:
                value = new_value
                todo = [value] if "|" in value else _split_list(value)
                todo = [s for s in todo if s not in done]
                i = 0
                continue
            i += 1

    def _read_command(self, command: str, depth: int, where: tuple[str | None, int | None],
                      what: str) -> str:
        """Run ``command`` and parse its output as configuration; return the output.

        Only when the file asking for it (``where``) and the program pass the safety test.
        """
        file, line = where
        if file is not None and os.path.exists(file):
            self.check_safe(file, f"to run the {what} command '{command}' of", where)
        try:
            argv = shlex.split(command)
            program = shutil.which(argv[0]) if argv else None
            if program is not None:
                self.check_safe(program, f"to run the {what} command '{command}': its program", where)
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"{what} command '{command}' could not run: {exc}", file=file, line=line,
                              hint="check the command and its path") from None
        if out.returncode != 0:
            raise ConfigError(f"{what} command '{command}' exited with status {out.returncode}: "
                              f"{out.stderr.strip()[:200]}", file=file, line=line,
                              hint="run it by hand to see why")
        name = f"{command} |"
        self.files.append(name)
        self._run(logical_lines(out.stdout), _Source(name, depth, chain=(name,)))
        return out.stdout

    # -- the statement loop ----------------------------------------------------------------
    def _error(self, src: _Source, line: Line, what: str, hint: str | None = None) -> ConfigError:
        if src.template:
            return ConfigError(f"use {src.use} (template line {line.first}): {what}",
                               file=src.file, line=src.use_line, hint=hint)
        return ConfigError(what, file=src.file, line=line.first, hint=hint)

    def _expand(self, text: str, src: _Source, line: Line) -> str:
        try:
            return self.x.expand(text)
        except MacroError as exc:
            raise self._error(src, line, str(exc)) from None

    def _run(self, lines: Iterable[Line], src: _Source) -> None:
        ifs = IfStack()
        here: _HereDoc | None = None
        last = Line("", 0, 0)
        for line in lines:
            last = line
            text = line.text
            if "\0" in text:  # no NUL reaches a value: every path a knob names is a C string
                raise self._error(src, line, "the line holds a NUL byte (\\0), which no value, "
                                  "name or path may contain", "remove it; a text editor may show it as ^@")
            if not text or text.startswith("#"):
                continue
            if here is not None:
                if text.startswith("@") and text[1:] == here.tag:
                    self._finish_heredoc(here, src)
                    here = None
                else:
                    here.lines.append(text)
                continue
            if text.startswith(":") and (ifs.inside_if() or _COLON_IF.match(text)):
                text = text[1:].lstrip()
            try:
                if ifs.handle(text, lambda expr, _l=line: self._condition(expr, src, _l)):
                    continue
            except ConditionError as exc:
                hint = ("conditions are numbers, true/false, defined NAME or version >= X.Y, "
                        "optionally negated with !" if "condition" in str(exc) else
                        "every elif/else/endif needs an open if before it")
                if str(exc).startswith("= "):
                    hint = ("a line starting with if/elif/else/endif is a conditional, so a knob "
                            "cannot be named IF, ELIF, ELSE or ENDIF")
                raise self._error(src, line, str(exc), hint) from None
            if not ifs.enabled():
                continue
            try:
                statement = parse_statement(text)
            except StatementError as exc:
                raise self._error(src, line, str(exc)) from None
            here = self._execute(statement, src, line)
        if here is not None:
            raise self._error(src, here.line, f"end of file while looking for '@{here.tag}', "
                              f"which should end the multi-line value of {here.name}",
                              f"add a line '@{here.tag}'")
        if ifs.inside_if():
            raise self._error(src, last, "endif(s) not found before end-of-file",
                              "close every 'if' with 'endif'")

    def _condition(self, expr: str, src: _Source, line: Line) -> bool:
        try:
            return test_condition(expr, self.x.expand, self.x.lookup, metaknobs.has_template)
        except MacroError as exc:
            raise ConditionError(str(exc)) from None

    def _origin(self, src: _Source, line: Line) -> Origin:
        if src.template:
            return Origin("file", src.file, src.use_line, src.use)
        return Origin("file", src.file, line.first)

    def _name(self, raw: str, src: _Source, line: Line) -> str:
        name = raw if src.template else self._expand(raw, src, line)
        if not name or any(c not in IDCHARS for c in name):
            raise self._error(src, line, f"illegal name <{name}>",
                              "names use letters, digits and the characters _ . /")
        return name

    def _execute(self, st: Statement, src: _Source, line: Line) -> _HereDoc | None:
        kind = st.kind
        if kind == "section":
            return None
        if kind in ("assign", "append", "heredoc"):
            name = self._name(st.name, src, line)
            where = f"{src.file}:{line.first}"
            if st.ignored_word:
                self.warnings.append(f"{where}: warning: the word '{st.ignored_word}' before the "
                                     f"operator is ignored (as HTCondor ignores it); {name} is set")
            if kind == "heredoc":
                return _HereDoc(name, st.value, line)
            if st.colon and name.lower() != "runbenchmarks":
                self.warnings.append(f"{where}: warning: obsolete use of ':' for parameter "
                                     f"assignment at {name} : {st.value}; write {name} = ...")
            value = self._self_expand(st.value, name, src, line)
            if kind == "append":
                existing = self.x.lookup(name)
                if existing:
                    value = f"{existing} {value}"
            self.define(name, value, self._origin(src, line))
            return None
        if kind == "use":
            self._use(st, src, line)
        elif kind == "include":
            self._include(st, src, line)
        elif kind == "error":
            raise self._error(src, line, f"error: {self._expand(st.value, src, line)}")
        elif kind == "warning":
            where = f"{src.file}:{src.use_line if src.template else line.first}"
            self.warnings.append(f"{where}: warning: {self._expand(st.value, src, line)}")
        return None

    def _self_expand(self, value: str, name: str, src: _Source, line: Line) -> str:
        try:
            return self.x.expand_self(value, name)
        except MacroError as exc:
            raise self._error(src, line, f"{name}: {exc}") from None

    def _finish_heredoc(self, here: _HereDoc, src: _Source) -> None:
        value = self._self_expand("\n".join(here.lines), here.name, src, here.line)
        self.define(here.name, value, self._origin(src, here.line))

    def _use(self, st: Statement, src: _Source, line: Line) -> None:
        category = self._expand(st.name, src, line).strip() if not src.template else st.name.strip()
        if not category:
            raise self._error(src, line, "use needs a category before ':'",
                              "write e.g. use ROLE : Personal")
        if category.upper() not in metaknobs.TEMPLATES:
            raise self._error(src, line, f"use {category}: unknown category",
                              "known categories: " + ", ".join(metaknobs.categories()))
        targets = split_use(st.value)
        if not targets:
            raise self._error(src, line, f"use {category}: no template named",
                              f"'htc config_val use {category}' lists them")
        for knob, args in targets:
            template = metaknobs.find_template(category, knob)
            if template is None:
                raise self._error(src, line, f"use {category}: does not recognise {knob}",
                                  f"'htc config_val use {category}' lists the templates")
            if src.depth + 1 >= MAX_DEPTH:
                raise self._error(src, line, f"use {category}: {knob} nesting too deep")
            label = f"{template.category}:{template.name}"
            use = f"{src.use} > {label}" if src.template else label
            body = metaknobs.expand_meta_args(template.body, args)
            inner = _Source(src.file, src.depth + 1, use=use,
                            use_line=src.use_line if src.template else line.first, chain=src.chain)
            self._run(template_lines(body), inner)

    def _include(self, st: Statement, src: _Source, line: Line) -> None:
        if src.template:
            raise self._error(src, line, "include is not allowed inside a metaknob template")
        try:
            if_exists, is_command, into = parse_include_options(st.name)
        except StatementError as exc:
            raise self._error(src, line, str(exc)) from None
        target = self._expand(st.value, src, line).strip()
        if not target:
            raise self._error(src, line, "include names no file", "write include : /path/to/file")
        if src.depth + 1 >= MAX_DEPTH:
            raise self._error(src, line, "includes nested too deep", "look for an include cycle")
        if is_command or target.endswith("|"):
            command = target[:-1].strip() if target.endswith("|") else target
            if into:
                cache = self._expand(into, src, line)
                if os.path.exists(cache):
                    target, is_command = cache, False
                else:
                    output = self._read_command(command, src.depth + 1, (src.file, line.first), "include")
                    with open(cache, "w", encoding="utf-8") as fh:
                        fh.write(output)
                    return
            if is_command:
                self._read_command(command, src.depth + 1, (src.file, line.first), "include")
                return
        path = os.path.abspath(target)
        if path in src.chain:
            cycle = " -> ".join(list(src.chain) + [path])
            raise self._error(src, line, f"include cycle: {cycle}", "remove one of the includes")
        if self.strict:
            self.check_safe(target, "to include", (src.file, line.first))
        try:
            with open(target, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            if if_exists:
                return
            raise self._error(src, line, f"include : {target}: cannot open it ({exc.strerror})",
                              "relative paths are relative to the current directory; write "
                              "$(CONFIG_ROOT)/file, or 'include ifexist :' for an optional file") from None
        self.files.append(target)
        self._run(logical_lines(text), _Source(target, src.depth + 1, chain=src.chain + (path,)))


def _split_list(value: str) -> list[str]:
    """Split a file/directory list on commas and white space (HTCondor's StringList)."""
    return [item for item in re.split(r"[,\s]+", value) if item]
