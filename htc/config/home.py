"""``$HTC_HOME``: where a personal pool keeps its configuration and state.

Layout (created on first use of any command that reads configuration)::

    $HTC_HOME/               default ~/.htc
        htc_config           the main configuration file (use ROLE : Personal)
        config.d/            LOCAL_CONFIG_DIR: drop-in files, read in name order
        spool/               SPOOL: job queue, history, sandboxes
        execute/             EXECUTE: job scratch directories (a root startd uses
                             /var/lib/htc/execute/<hash> instead when the slot user cannot
                             reach this one: htc.daemons.execute_dir)
        log/                 LOG (and LOCK): daemon logs, address files, sockets

The generated file is plain configuration; edit it freely. It is never overwritten.

Modes are explicit, whatever the umask of whoever runs first: directories 0755 and
``htc_config`` 0644, owned by that user (see docs/security.md). The daemons refuse to run from
a home, or read configuration, that other users can change.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from htc.config.detected import htc_home_path
from htc.config.errors import ConfigError
from htc.config.safety import DIR_MODE, FILE_MODE, make_dir

__all__ = ["htc_home", "ensure_home", "CONFIG_NAME", "PERSONAL_CONFIG"]

CONFIG_NAME = "htc_config"
SUBDIRS = ("config.d", "spool", "execute", "log")

PERSONAL_CONFIG = """\
# htc configuration of a personal pool: every daemon on this machine, run by you.
# Created by htc on first use; edit freely, htc never overwrites it.
# `htc config_val -v NAME` shows a value and where it comes from;
# `htc config_val -summary` shows everything set here. Language: docs/configuration.md.

use ROLE : Personal

# All state lives under HTC_HOME (this directory unless $HTC_HOME says otherwise).
LOCAL_DIR = $(HTC_HOME)
SPOOL     = $(LOCAL_DIR)/spool
EXECUTE   = $(LOCAL_DIR)/execute
LOG       = $(LOCAL_DIR)/log
LOCK      = $(LOG)

# Drop-in files, read after this one in name order; later files win.
LOCAL_CONFIG_DIR = $(LOCAL_DIR)/config.d
"""


def htc_home(env: Mapping[str, str] | None = None) -> str:
    """The htc home directory: ``$HTC_HOME`` if set, else ``~/.htc`` (absolute).

    Args:
        env: the environment to consult (default: ``os.environ``).
    """
    return htc_home_path(os.environ if env is None else env)


def ensure_home(env: Mapping[str, str] | None = None) -> str:
    """Create ``$HTC_HOME`` with a personal-pool ``htc_config`` and its directories if missing.

    Args:
        env: the environment to consult (default: ``os.environ``).

    Returns:
        The path of ``$HTC_HOME/htc_config``.

    Raises:
        ConfigError: the directory or file cannot be created (the message names it).
    """
    home = htc_home(env)
    path = os.path.join(home, CONFIG_NAME)
    try:
        _make_dirs(home)
        for sub in SUBDIRS:
            make_dir(os.path.join(home, sub))
        if not os.path.exists(path):
            # per thread too: threads of one process (a DAG manager's submit workers) may all be
            # first to load the configuration
            tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
            os.fchmod(fd, FILE_MODE)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(PERSONAL_CONFIG)
            try:
                os.link(tmp, path)  # atomic and never replaces a file another process just made
            except FileExistsError:
                pass  # another process or thread made it first: theirs is the same text
            finally:
                os.unlink(tmp)
    except OSError as exc:
        raise ConfigError(f"cannot create the htc home {home}: {exc.strerror}",
                          hint="set HTC_HOME to a writable directory, or HTC_CONFIG to an existing "
                               "configuration file") from None
    return path


def _make_dirs(path: str) -> None:
    """``os.makedirs`` with :data:`DIR_MODE` for every directory it creates, whatever the umask."""
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        _make_dirs(parent)
    make_dir(path, DIR_MODE)
