"""``$$(...)`` late binding: filling a job's ad from the machine it matched.

Submit keeps ``$$(attr)`` literally in the job ad; when the schedd starts the job on a
matched machine it substitutes, in every attribute whose text contains ``$$(``:

* ``$$(Attr)`` -- the machine ad's ``Attr`` (a string without its quotes, other values as
  ClassAd text), saved in the job as ``MATCH_Attr`` so a restarted shadow can expand again
  (HTCondor's ``MATCH_`` attributes);
* ``$$(Attr:default)`` -- ``default`` when the machine has no ``Attr``;
* ``$$([expr])`` -- the value of ``expr`` evaluated with the machine ad as ``MY`` and the
  job as ``TARGET``, saved as ``MATCH_EXP_<JobAttr>``.

An attribute that cannot be expanded makes the job unrunnable on that machine; HTCondor
holds such a job with "Cannot expand $$(...)".
"""

from __future__ import annotations

from collections.abc import Mapping

from htc.submit.errors import SubmitError


class LateBindingError(SubmitError):
    """A ``$$(...)`` in the job ad has no value on the matched machine."""


def _value_text(v, *, in_string: bool) -> str | None:
    from htc import classad

    if v is None or v is classad.Undefined or type(v).__name__ in ("Undefined", "Error"):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) else str(v)
    return str(v) if not in_string else None


def _find(text: str, pos: int) -> tuple[int, int, str] | None:
    """The next ``$$(...)`` at or after ``pos``: (start, end, body)."""
    start = text.find("$$(", pos)
    if start < 0:
        return None
    body_start = start + 3
    if text.startswith("[", body_start):
        close = text.find("])", body_start)
        if close < 0:
            return None
        return start, close + 2, text[body_start:close + 1]
    close = text.find(")", body_start)
    if close < 0:
        return None
    return start, close + 1, text[body_start:close]


def expand_late_binding(job: Mapping[str, str], machine) -> dict[str, str]:
    """Expand ``$$(...)`` in a job ad against the matched machine ad.

    Args:
        job: the job ad as attribute -> old-syntax expression text (``cluster_ad | proc_ad``).
        machine: the machine's ``htc.classad.ClassAd``.
    Returns:
        The attributes to update: each expanded attribute and the ``MATCH_*`` values saved.
    Raises:
        LateBindingError: an attribute the machine does not have and that has no default;
            the message says which, as HTCondor's hold reason does.
    """
    from htc import classad

    job_ad = None
    updates: dict[str, str] = {}
    lower_job = {k.lower(): k for k in job}
    for attr, text in job.items():
        if "$$(" not in text or attr.upper().startswith("MATCH_"):
            continue
        out = []
        pos = 0
        in_string = text.lstrip().startswith('"')
        while True:
            found = _find(text, pos)
            if found is None:
                out.append(text[pos:])
                break
            start, end, body = found
            out.append(text[pos:start])
            if body.startswith("["):
                if job_ad is None:
                    job_ad = classad.parseOne("\n".join(f"{k} = {v}" for k, v in job.items()),
                                              classad.ParserType.Old)
                try:
                    v = classad.ExprTree(body[1:-1]).eval(machine, job_ad)
                except Exception:  # a broken expression is reported as unexpandable
                    v = None
                value = _value_text(v, in_string=in_string)
                if value is None:
                    raise LateBindingError(f"Cannot expand $$({body}) in {attr}")
                updates[f"MATCH_EXP_{attr}"] = _literal(v, value)
            else:
                name, colon, default = body.partition(":")
                name = name.strip()
                value = None
                if name in machine:
                    v = machine.eval(name)
                    value = _value_text(v, in_string=in_string)
                    if value is not None:
                        updates[f"MATCH_{name}"] = _literal(v, value)
                if value is None and f"match_{name.lower()}" in lower_job:
                    saved = job[lower_job[f"match_{name.lower()}"]]
                    value = saved[1:-1] if saved.startswith('"') else saved
                if value is None:
                    if not colon:
                        raise LateBindingError(f"Cannot expand $$({body}) in {attr}: the matched "
                                               f"machine has no {name}")
                    value = default
            out.append(value)
            pos = end
        updates[attr] = "".join(out)
    return updates


def _literal(v, text: str) -> str:
    if isinstance(v, str):
        return '"' + text.replace('"', '\\"') + '"'
    return text
