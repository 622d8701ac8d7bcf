"""The interposition runtime for jobs: remote system calls and transparent checkpointing.

Nothing here is a daemon. The package ships C sources (``htc/runtime/c``) that
:mod:`htc.runtime.build` compiles with the host's C compiler on first use, into a cache keyed
by the sources' hash:

* ``libjobrt.so`` -- an LD_PRELOAD library. Its remote-I/O half (``jobrt_io*.c``) forwards the
  file system calls a job makes on paths in its remote namespace over an inherited socket to a
  server (:mod:`htc.runtime.remote_io`) that runs them in the job's submit directory; its
  checkpoint half (``jobrt_ckpt*.c``) writes the process's image on a signal.
* ``jobrt-restart`` and ``jobrt-dump`` -- the restarter and the ptrace dumper (programs).

The package sits low in the layer order (next to htc.wire): the starter and the shadow import
it, it imports only :mod:`htc.errors`.
"""

from __future__ import annotations

from htc.runtime.build import RuntimeUnavailable, library, program

__all__ = ["RuntimeUnavailable", "library", "program"]
