"""NewsTaken on the schedd's side (htc.daemons.schedd.sessions): the calls whose end lies before
the client's offset are forgotten and their files removed from ``calls/`` -- only theirs, and
never through a link."""

from __future__ import annotations

from htc.daemons.schedd.sessions import _remove_call_files, _Session, _taken


def _session(tmp_path) -> _Session:
    (tmp_path / "calls").mkdir()
    session = _Session(tmp_path, None, 0)
    for i, job in enumerate(("1.0", "1.1", "1.2")):
        session.jobs[job] = f"c{i}"
        session.ended.append((100 * (i + 1), job, f"c{i}"))
        for suffix in (".call", ".result", ".out", ".err"):
            (tmp_path / "calls" / f"c{i}{suffix}").write_text("x")
    return session


def test_the_files_of_calls_the_client_holds_go_and_the_others_stay(tmp_path):
    session = _session(tmp_path)
    calls = _taken(session, 250)  # the mirror holds the first two calls' ends, not the third's
    assert calls == ["c0", "c1"] and session.jobs == {"1.2": "c2"} and len(session.ended) == 1
    _remove_call_files(session, calls)
    assert sorted(p.name for p in (tmp_path / "calls").iterdir()) == ["c2.call", "c2.err", "c2.out", "c2.result"]
    _remove_call_files(session, calls)  # (again: nothing left to remove, no error)
    assert _taken(session, 250) == []


def test_a_calls_directory_replaced_by_a_link_is_not_followed(tmp_path):
    session = _session(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "calls").rename(elsewhere)
    (tmp_path / "calls").symlink_to(elsewhere)
    _remove_call_files(session, _taken(session, 300))
    assert len(list(elsewhere.iterdir())) == 12  # nothing removed through the link
