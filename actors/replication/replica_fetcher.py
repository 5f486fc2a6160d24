"""A broker's replication from the leaders it follows: one fetcher per leader broker, carrying
every partition this broker follows there, with at most one fetch in flight and an incremental
fetch session (KIP-227, fetch_session.py); the answers are applied to the replicas, and the next
fetch leaves at once (Kafka's ReplicaFetcherManager, AbstractFetcherThread and
ReplicaFetcherThread). A mixin of ReplicaManager (replica_manager.py).

Rules: a fetch at offset x confirms everything below x, so with fsync storage it leaves only once
that is durable; a fetch unanswered past its wait and a grace (or replica.socket.timeout.ms) is sent
again in a new session; with nothing to fetch, or after an error, the fetcher backs off
replica.fetch.backoff.ms; a partition whose fetched batch cannot be appended leaves the fetcher
until the next leader epoch (AbstractFetcherThread.markPartitionFailed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.contract import Envelope, Output

from .fetch_session import FollowerSession
from .messages import INITIAL_SESSION_EPOCH, OFFSET_OUT_OF_RANGE, FetchRequest, FetchResponse

REPLICA_FETCH_BACKOFF_MS = 1_000  # replica.fetch.backoff.ms
# Without replica.socket.timeout.ms, a fetch unanswered this long after its wait is retried (a
# lost connection is noticed).
FETCH_REQUEST_GRACE_MS = 2_000

Key = tuple[str, int]


@dataclass
class Fetcher:
    """Replicates the partitions this broker follows on one leader broker."""

    leader: int
    partitions: dict[Key, None] = field(default_factory=dict)  # ordered set
    request_id: int = 0
    sent_ms: float | None = None  # a fetch is in flight since then
    next_fetch_ms: float | None = None  # back-off: no fetch before then
    session: FollowerSession = field(default_factory=FollowerSession)


class ReplicaFetching:
    def _unfollow(self, key: Key) -> None:
        for f in self.fetchers.values():
            if key in f.partitions:
                del f.partitions[key]
                f.session.forget(key)

    def _follow(self, key: Key, leader: int, now_ms: float, out: Output) -> None:
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = Fetcher(leader)
        f.partitions[key] = None
        f.session.add(key)
        if f.sent_ms is None and (f.next_fetch_ms is None or f.next_fetch_ms <= now_ms):
            self._send_fetch(f, now_ms, out)

    def _send_fetch(self, f: Fetcher, now_ms: float, out: Output) -> None:
        # Nothing to fetch yet (no broker epoch, no replica of the partitions followed): back off,
        # as Kafka's fetcher thread does with no active partition (AbstractFetcherThread.maybeFetch:
        # "Back off for fetchBackOffMs"). A back-off left in the past would wake the broker again
        # and again at the same instant.
        if not f.partitions or self.env.broker_epoch is None:
            f.sent_ms = None
            f.next_fetch_ms = now_ms + REPLICA_FETCH_BACKOFF_MS
            return
        session = f.session
        positions = []
        if session.next_epoch == INITIAL_SESSION_EPOCH:
            # A full request: every partition, and a new session.
            session.reset()
            for key in f.partitions:
                replica = self.replicas.get(key)
                if replica is not None:
                    positions.append(session.sent.setdefault(key, replica.fetch_position()))
            if not positions:
                f.sent_ms = None
                f.next_fetch_ms = now_ms + REPLICA_FETCH_BACKOFF_MS
                return
        else:
            for key in session.changed:
                replica = self.replicas.get(key)
                if replica is not None and key in f.partitions:
                    position = replica.fetch_position()
                    if session.sent.get(key) != position:
                        session.sent[key] = position
                        positions.append(position)
            session.changed.clear()
        forgotten = tuple(session.forgotten)
        session.forgotten.clear()
        self.next_request_id += 1
        f.request_id = self.next_request_id
        f.sent_ms = now_ms
        f.next_fetch_ms = None
        req = FetchRequest(
            f.request_id, self.env.broker_id, self.env.broker_epoch, self.env.settings.config.replica_fetch_wait_max_ms,
            tuple(positions), session.session_id, session.next_epoch, forgotten,
        )
        # A fetch at offset x confirms everything below x: with fsync storage it leaves only once
        # what it confirms is durable.
        out.send(Envelope(self.env.node_id, f"b{f.leader}", req, after_flush=self.env.sync_flush))

    def on_fetch_response(self, src: str, resp: FetchResponse, now_ms: float, out: Output) -> None:
        f = self.fetchers.get(int(src[1:]))
        if f is None or f.sent_ms is None or resp.request_id != f.request_id:
            return  # an answer to a fetch we gave up on
        f.sent_ms = None
        session = f.session
        if resp.error is not None:
            # The leader does not know the session (it restarted) or its numbering: start over.
            session.reset()
            self._send_fetch(f, now_ms, out)
            return
        if session.next_epoch == INITIAL_SESSION_EPOCH:
            session.session_id = resp.session_id
        session.next_epoch += 1
        failed = False
        for fp in resp.partitions:
            key = (fp.topic, fp.partition)
            replica = self.replicas.get(key)
            if key not in f.partitions or replica is None:
                continue
            replica.on_fetched(fp, now_ms, out)
            self._settle(key, replica)
            if replica.fetch_failed:
                self._unfollow(key)  # until a new leader epoch makes it a follower again
                continue
            session.changed[key] = None  # its position may have moved
            if fp.error is not None and fp.diverging_epoch is None and fp.error != OFFSET_OUT_OF_RANGE:
                failed = True
        if failed:
            f.next_fetch_ms = now_ms + REPLICA_FETCH_BACKOFF_MS
        elif f.partitions:
            self._send_fetch(f, now_ms, out)

    def _fetch_timeout_ms(self) -> float:
        """How long a fetch waits for its answer before the follower sends another."""
        cfg = self.env.settings.config
        if cfg.replica_socket_timeout_ms is not None:
            return cfg.replica_socket_timeout_ms
        return cfg.replica_fetch_wait_max_ms + FETCH_REQUEST_GRACE_MS
