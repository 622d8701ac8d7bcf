"""Reading and writing captured.json: each proc ad stored as its difference from one base ad."""

from __future__ import annotations


def pack(records: list[dict]) -> dict:
    """Store each proc ad as its difference from one base ad (the file stays small)."""
    base = next(ad for r in records for ad in r["procs"].values())
    out = []
    for r in records:
        procs = {}
        for key, ad in r["procs"].items():
            procs[key] = {"diff": {a: v for a, v in ad.items() if base.get(a) != v},
                          "absent": sorted(a for a in base if a not in ad)}
        out.append(dict(r, procs=procs))
    return {"base": base, "cases": out}


def unpack(data: dict) -> list[dict]:
    """The records :func:`pack` stored, with full proc ads."""
    base = data["base"]
    out = []
    for r in data["cases"]:
        procs = {}
        for key, d in r["procs"].items():
            ad = {a: v for a, v in base.items() if a not in d["absent"]}
            ad.update(d["diff"])
            procs[key] = ad
        out.append(dict(r, procs=procs))
    return out
