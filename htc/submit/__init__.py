"""The submit description language (condor_submit's) and the job ClassAds it builds.

::

    from htc.submit import Submit, SubmitError
    sub = Submit(open("job.sub").read(), filename="job.sub")
    for ad in sub.jobs(clusterid=42):        # htc.classad.ClassAd per proc
        ...
    cluster = sub.cluster(42)                # the job queue's fast path
    cluster.cluster_ad, list(cluster.proc_ads(0, 10))

See docs/submit.md for the language.
"""

from htc.submit.cluster import SubmittedCluster
from htc.submit.errors import DagFileError, FileCheckError, SubmitError
from htc.submit.latebinding import LateBindingError, expand_late_binding
from htc.submit.settings import SubmitSettings
from htc.submit.submit import Submit

__all__ = ["DagFileError", "FileCheckError", "LateBindingError", "Submit", "SubmitError", "SubmitSettings",
           "SubmittedCluster", "expand_late_binding"]
