"""The projection's replica log mirrors: what the incremental checks remember about a log is keyed
by its version, so a version must never be seen twice, even across mirrors (a restarted replica
gets a new mirror; `id()` of a freed one may be reused, which once let a check resume from where
it had stopped on the old log)."""

from observability.projection import LogMirror


def test_every_mirror_and_every_cut_has_a_version_of_its_own():
    seen = set()
    for _ in range(1000):
        m = LogMirror()  # freed at once: the next may reuse its address, never its version
        seen.add(m.version)
    assert len(seen) == 1000


def test_appends_keep_the_version_and_cuts_change_it():
    m = LogMirror()
    m.append(0, 5, 0, 111)
    v = m.version
    m.append(5, 5, 0, 222)
    assert m.version == v  # a prefix checked at v is still there
    m.truncate(5)
    assert m.version != v and m.end_offset == 5
    w = m.version
    m.replace([0], [3], [1], [333])
    assert m.version not in (v, w) and m.end_offset == 3
