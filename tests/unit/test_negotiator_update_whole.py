"""``SlotTable.update_whole`` (``htc.daemons.negotiator.columns``): a fill's rows brought up to
date in one call from the sizes, taken flags and weights the fill knows leave the table as
``SlotTable.update`` of each block in order (reading the slot's ad after each block's carve):
the same ``res``, columns, tags, uniform tags, ``alive``, ``weight``, ``log`` and ``epoch``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from htc.classad import ClassAd
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.slotreads import literal
from htc.daemons.negotiator.slots import Slot

_CARVED = ("cpus", "memory", "disk")


def _slots(rnd: random.Random) -> list:
    slots = []
    for i in range(rnd.randint(1, 30)):
        ad = {"Name": f"slot1@n{i}", "PartitionableSlot": True,
              "Cpus": rnd.choice([8, 16, 64]), "Memory": rnd.choice([8192, 65536]),
              "Disk": rnd.choice([100_000, 1_000_000])}
        if rnd.random() < 0.15:  # (a real column: update makes it non-uniform, a new epoch)
            ad[rnd.choice(["Cpus", "Memory", "Disk"])] += 0.0
        if rnd.random() < 0.05:  # (no Disk: the carved columns are made on demand)
            del ad["Disk"]
        slots.append(Slot(ClassAd(ad), ad["Name"]))
    return slots


def _table(slots, built: set) -> SlotTable:
    table = SlotTable(slots)
    for lname in built:
        try:
            table.column(lname)
            table.uniform(lname)
        except Exception:  # (a column the table refuses stays unbuilt in both tables)
            table._bad.discard(lname)
    return table


def _state(table: SlotTable):
    columns = {name: (tags.tolist(), values.tolist())
               for name, (tags, values) in table._columns.items()}
    # (repr: NaN, a slot that does not say, then equals NaN)
    return (repr(table.res.tolist()), repr(columns), dict(table._uniform), table.alive.tolist(),
            table.weight.tolist(), list(table.log), table.epoch)


@pytest.mark.parametrize("seed", range(60))
def test_update_whole_is_update_of_each_block_in_order(seed):
    rnd = random.Random(seed)
    slots = _slots(rnd)
    built = {name for name in _CARVED if rnd.random() < 0.8}
    one, whole = _table(slots, built), _table(slots, built)
    rows, left, taken, weight = [], [[], [], []], [], []
    for _ in range(rnd.randint(0, 40)):  # blocks: a row may come back in a later block
        row = rnd.randrange(len(slots))
        slot = slots[row]
        sizes = []
        for lname in _CARVED:
            node = slot.ad._exprs.get(lname)
            have = 1 if node is None else int(node.value)
            size = rnd.randint(0, have)  # (a carve leaves a smaller whole number)
            slot.ad._exprs[lname] = literal(size)
            sizes.append(size)
        if rnd.random() < 0.3:
            slot.taken = True
        slot.weight = float(rnd.choice([sizes[0], 1.0, 2.5]))
        one.update(slot)  # (reads the ad as this block left it)
        rows.append(row)
        for k in range(3):
            left[k].append(sizes[k])
        taken.append(slot.taken)
        weight.append(slot.weight)
    before = _state(whole)
    whole.update_whole(np.array(rows, dtype=np.intp), np.array(left, dtype=float).reshape(3, -1),
                       taken, weight)
    assert _state(whole) == _state(one)
    if rows and built:
        assert _state(whole) != before  # (the blocks changed the table: the test compares)
