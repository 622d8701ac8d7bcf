"""Rescue DAG files on disk: ``<dag>.rescue001`` ... which one to run, which one to write next.

A failed run leaves ``<primary dag>.rescueNNN`` (``%03d``), numbered one past the highest
there, up to ``DAGMAN_MAX_RESCUE_NUM`` (at the maximum the last one is overwritten). A new run
of the DAG applies the highest (``DAGMAN_AUTO_RESCUE``), or the one ``-DoRescueFrom N`` names;
``-force`` starts from scratch and renames the rescue files ``.old``.
"""

from __future__ import annotations

import glob
import os
import re

from htc.errors import UsageError

__all__ = ["existing_rescues", "next_rescue", "rename_old", "rescue_path", "rescue_to_use", "save_file_path"]


def rescue_path(dag_file: str, number: int) -> str:
    """``<dag file>.rescueNNN``."""
    return f"{os.path.abspath(dag_file)}.rescue{number:03d}"


def existing_rescues(dag_file: str) -> dict[int, str]:
    """The rescue files of ``dag_file`` there now: number -> path."""
    base = os.path.abspath(dag_file)
    found = {}
    for path in glob.glob(glob.escape(base) + ".rescue[0-9][0-9][0-9]"):
        match = re.search(r"\.rescue(\d{3})$", path)
        if match:
            found[int(match.group(1))] = path
    return found


def rescue_to_use(dag_file: str, *, auto: bool, from_number: int = 0, max_num: int = 100) -> str | None:
    """The rescue file a new run applies: ``-DoRescueFrom N``'s, else the highest when ``auto``.

    Raises:
        UsageError: ``-DoRescueFrom N`` names a rescue file that is not there.
    """
    found = existing_rescues(dag_file)
    if from_number > 0:
        if from_number not in found:
            raise UsageError(f"-DoRescueFrom {from_number}: there is no rescue DAG {rescue_path(dag_file, from_number)}; "
                             f"the rescue DAGs of this DAG are {sorted(found) or 'none'}")
        return found[from_number]
    if auto and found:
        return found[max(n for n in found if n <= max_num) if any(n <= max_num for n in found) else max(found)]
    return None


def next_rescue(dag_file: str, max_num: int = 100) -> str:
    """The rescue file a failing run writes: one past the highest there, at most ``max_num``."""
    found = existing_rescues(dag_file)
    number = min(max(found, default=0) + 1, max(1, max_num))
    return rescue_path(dag_file, number)


def rename_old(dag_file: str, above: int = 0) -> list[str]:
    """Rename the rescue files numbered above ``above`` to ``<name>.old``; returns the new names."""
    renamed = []
    for number, path in sorted(existing_rescues(dag_file).items()):
        if number > above:
            os.replace(path, path + ".old")
            renamed.append(path + ".old")
    return renamed


def save_file_path(dag_file: str, name: str) -> str:
    """The save point file ``-load_save NAME`` means: a path as given (relative to the current
    directory), or a bare name in the DAG's ``save_files/`` directory, as DAGMan looks for it.

    Raises:
        UsageError: there is no such file.
    """
    if os.sep in name:
        path = os.path.abspath(name)
    else:
        path = os.path.join(os.path.dirname(os.path.abspath(dag_file)), "save_files", name)
    if not os.path.isfile(path):
        raise UsageError(f"-load_save {name}: there is no save file {path}; the DAG's SAVE_POINT_FILE nodes "
                         "write theirs in its save_files/ directory when they start")
    return path
