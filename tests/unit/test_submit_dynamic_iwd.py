"""A later proc's ad re-runs only the per-proc submit commands (htc.submit.cluster); a ``$F``
path those commands make absolute is relative to the job's iwd, so

* with a per-proc ``initialdir``, a command whose ``$Ff()`` path is relative depends on it
  (it reads the iwd) and is re-run for each proc: each gets its own directory's path;
* with a fixed ``initialdir`` other than the submit directory, a re-run per-proc command
  resolves against that iwd, as proc 0's did, not against the submit directory.

Each proc's ad must equal the one a proc built on its own (every command run) would have."""

from __future__ import annotations

import pytest

from htc.submit.submit import Submit


def _ads(text: str, cwd, fast: bool) -> list[dict[str, str]]:
    return [dict(ad) for ad in Submit(text, cwd=str(cwd)).cluster(7, fast=fast).job_ads()]


@pytest.fixture
def dirs(tmp_path):
    for i in range(5):
        (tmp_path / f"d{i}").mkdir()
    return tmp_path


@pytest.mark.parametrize("fast", [True, False])
def test_a_per_proc_initialdir_makes_each_procs_ff_path_its_own(dirs, fast):
    text = ('executable = /bin/true\ninitialdir = d$(Process)\nf = x.txt\narguments = $Ff(f)\n'
            'environment = "P=$Ffp(f)"\nqueue 5\n')
    ads = _ads(text, dirs, fast)
    assert [ad["Args"] for ad in ads] == [f'"{dirs}/d{i}/x.txt"' for i in range(5)]
    assert [ad["Environment"] for ad in ads] == [f'"P={dirs}/d{i}/"' for i in range(5)]


@pytest.mark.parametrize("fast", [True, False])
def test_a_fixed_initialdir_is_where_a_later_procs_ff_path_is_made_absolute(dirs, fast):
    text = "executable = /bin/true\ninitialdir = d1\nf = x$(Process).txt\narguments = $Ff(f)\nqueue 5\n"
    ads = _ads(text, dirs, fast)
    assert [ad["Args"] for ad in ads] == [f'"{dirs}/d1/x{i}.txt"' for i in range(5)]


def test_an_absolute_ff_path_does_not_make_a_command_per_proc(dirs):
    text = "executable = /bin/true\ninitialdir = d$(Process)\nf = /abs/x.txt\narguments = $Ff(f)\nqueue 3\n"
    cluster = Submit(text, cwd=str(dirs)).cluster(7)
    assert [ad["Args"] for ad in cluster.job_ads()] == ['"/abs/x.txt"'] * 3
    assert cluster.cluster_ad["Args"] == '"/abs/x.txt"'  # the same for every proc: in the cluster ad
