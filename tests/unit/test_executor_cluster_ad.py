"""The pool backend makes a cluster ad's text once per option set, not once per submitted batch."""

from __future__ import annotations

from htc.executors.options import CallOptions
from htc.executors.pool import PoolBackend
from htc.executors.pool_ads import ad_text


def test_a_cluster_ad_is_made_once_per_option_set():
    backend = PoolBackend(None)
    made = []

    def template(options):
        made.append(options)
        return {"RequestCpus": str(options.request_cpus), "Cmd": '"/usr/bin/python3"'}

    backend._template = template
    one, two = CallOptions(), CallOptions(request_cpus=2)
    texts = [backend._cluster_ad(o) for o in (one, one, two, one, two)]
    assert texts == [ad_text(template(o)) for o in (one, one, two, one, two)]
    assert made[:2] == [one, two]  # (then the five of the expected texts above)
    assert len(made) == 2 + 5
