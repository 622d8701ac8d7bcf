"""A minimal stand-in for condor_schedd, used only to capture HTCondor's own job ads.

It speaks just enough CEDAR (framing, CLAIMTOBE authentication) and the queue-management
calls for ``htcondor2.Schedd.submit()`` to send its ads, and records them.  Unlike the shared
capture helper it serves many submissions in a row: after each connection it writes
``<outdir>/<n>.json`` (``n`` counting from 0) so one listener can record a whole batch.

    python fakeschedd.py PORTFILE OUTDIR [CLUSTER]
"""

import json
import os
import socket
import struct
import sys

NEWCLUSTER, NEWPROC, SETATTR, COMMIT_NOFLAGS = 10002, 10003, 10006, 10007
SETATTR2, CLOSE, SETOWNER, COMMIT, GETCAPS = 10027, 10028, 10030, 10031, 10036


class Conn:
    """One CEDAR connection: reads length-framed messages and decodes ints and strings."""

    def __init__(self, s):
        self.s = s
        self.buf = b""
        self.pos = 0

    def _recvn(self, n):
        d = b""
        while len(d) < n:
            c = self.s.recv(n - len(d))
            if not c:
                raise EOFError
            d += c
        return d

    def read_msg(self):
        data = b""
        while True:
            hdr = self._recvn(5)
            data += self._recvn(struct.unpack(">I", hdr[1:])[0])
            if hdr[0]:
                break
        self.buf, self.pos = data, 0

    def int(self):
        v = struct.unpack(">q", self.buf[self.pos:self.pos + 8])[0]
        self.pos += 8
        return v

    def str(self):
        if self.buf[self.pos] == 0xFF:
            self.pos += 1
            return None
        e = self.buf.index(b"\0", self.pos)
        v = self.buf[self.pos:e].decode()
        self.pos = e + 1
        return v

    def send(self, payload):
        self.s.sendall(bytes([1]) + struct.pack(">I", len(payload)) + payload)


def pint(v):
    return struct.pack(">q", v)


def pstr(v):
    return v.encode() + b"\0"


def caps_ad(attrs):
    out = pint(len(attrs))
    for k, v in attrs:
        out += pstr(f"{k} = {v}")
    return out + pstr("") + pstr("")


def session(c, cluster, ads):
    """Serve one submission, recording {"cluster.proc": {attr: text}} into ``ads``."""
    c.read_msg()
    cmd = c.int()
    if cmd == 60010:  # DC_AUTHENTICATE: security negotiation, which we do not speak
        return
    c.int()  # offered methods
    c.send(pint(2))  # CLAIMTOBE
    c.read_msg()
    c.int()
    c.str()
    c.send(pint(1))
    proc = -1
    while True:
        c.read_msg()
        sc = c.int()
        if sc == GETCAPS:
            c.int()
            c.send(caps_ad([("LateMaterialize", "false")]))
        elif sc == NEWCLUSTER:
            c.send(pint(cluster))
        elif sc == NEWPROC:
            c.int()
            proc += 1
            c.send(pint(proc))
        elif sc in (SETATTR, SETATTR2):
            cl, pr, val, name = c.int(), c.int(), c.str(), c.str()
            flags = c.buf[c.pos] if sc == SETATTR2 else 0
            ads.setdefault(f"{cl}.{pr}", {})[name] = val
            if not (flags & 2) and sc == SETATTR:
                c.send(pint(0))
        elif sc in (COMMIT, COMMIT_NOFLAGS):
            if sc == COMMIT:
                c.int()
            c.send(pint(0))
        elif sc == SETOWNER:
            c.str()
            c.send(pint(0))
        elif sc == CLOSE:
            return
        else:
            c.send(pint(-1) + pint(22))


def serve(port_file, outdir, cluster):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(5)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    n = 0
    while True:
        s, _ = ls.accept()
        ads = {}
        try:
            session(Conn(s), cluster, ads)
        except EOFError:
            pass
        s.close()
        if not ads:
            continue
        path = os.path.join(outdir, f"{n}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(ads, f)
        os.rename(path + ".tmp", path)
        n += 1


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 123)
