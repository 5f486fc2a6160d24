"""A leader broker's side of its followers' fetch sessions: each fetch updates the follower's
session (KIP-227, fetch_session.py), the partitions that can have changed are processed by their
replicas (follower_fetches.py), and the fetch is answered with what is new, or parked until a
partition has something or its wait (replica.fetch.wait.max.ms) ends (Kafka's
ReplicaManager.fetchMessages, FetchSessionCache and the DelayedFetch purgatory). A mixin of
ReplicaManager (replica_manager.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import Envelope, Output

from .fetch_session import LeaderSession
from .messages import (
    FETCH_SESSION_ID_NOT_FOUND,
    INITIAL_SESSION_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    FetchedPartition,
    FetchRequest,
    FetchResponse,
)

Key = tuple[str, int]


@dataclass
class ParkedFetch:
    src: str
    request: FetchRequest
    deadline_ms: float
    session: LeaderSession
    answers: dict[Key, FetchedPartition | None]  # the partitions it processed


class LeaderFetches:
    def _on_session_fetch(self, src: str, req: FetchRequest, now_ms: float, out: Output) -> None:
        """A follower's fetch in its session: update the session from the request, process the
        partitions that can have changed, answer those with something new, or park until one
        has."""
        follower = req.replica_id
        reg = self.env.image.brokers.get(follower)
        # What the follower's answers depend on in its registration (KIP-903's epoch check, and
        # whether it may join an ISR).
        registered = (reg.epoch, reg.fenced, reg.in_controlled_shutdown) if reg is not None else None
        if req.session_epoch == INITIAL_SESSION_EPOCH:
            self.next_session_id += 1
            # Unique across this broker's restarts too (a new broker epoch each time).
            session_id = ((self.env.broker_epoch or 0) << 20) + self.next_session_id
            session = self.sessions[follower] = LeaderSession(session_id, follower, req.broker_epoch, registered)
        else:
            session = self.sessions.get(follower)
            if session is None or session.session_id != req.session_id:
                out.send(Envelope(self.env.node_id, src, FetchResponse(req.request_id, (), error=FETCH_SESSION_ID_NOT_FOUND)))
                return
            if req.session_epoch != session.epoch + 1:
                out.send(Envelope(self.env.node_id, src, FetchResponse(req.request_id, (), error=INVALID_FETCH_SESSION_EPOCH)))
                return
            for key in req.forgotten:
                session.positions.pop(key, None)
                session.dirty.pop(key, None)
                session.sent_hwm.pop(key, None)
                session.last_processed_ms.pop(key, None)
            if (req.broker_epoch, registered) != (session.broker_epoch, session.registered_epoch):
                # The follower's broker epoch, or what the metadata says of it, moved: every
                # partition's answer may change (KIP-903's check), or its ISR expansion.
                session.broker_epoch, session.registered_epoch = req.broker_epoch, registered
                session.dirty.update(dict.fromkeys(session.positions))
        session.epoch = req.session_epoch
        for fp in req.partitions:
            key = (fp.topic, fp.partition)
            session.positions[key] = fp
            session.dirty[key] = None
        session.previous_fetch_ms, session.last_fetch_ms = session.last_fetch_ms, now_ms
        # Process what can have changed; a change during the processing or after it marks the
        # partition again (`_settle`), so that the next fetch processes it.
        processed = list(session.dirty)
        session.dirty.clear()
        answers: dict[Key, FetchedPartition | None] = {}
        for key in processed:
            fp = session.positions[key]
            replica = self.replicas.get(key)
            if replica is None:
                answers[key] = FetchedPartition(fp.topic, fp.partition, self._missing_replica_error(key))
                continue
            if session.skipped_since_processed(key, session.previous_fetch_ms):
                replica.note_skipped_fetch(follower, session.previous_fetch_ms)
            session.last_processed_ms[key] = now_ms
            answers[key] = replica.on_follower_fetch(fp, follower, req.broker_epoch, now_ms, out)
            self._settle(key, replica)
        if any(a is not None for a in answers.values()) or req.max_wait_ms <= 0:
            self._answer_session(src, req.request_id, session, answers, out)
        else:
            self.parked.watch(ParkedFetch(src, req, now_ms + req.max_wait_ms, session, answers))

    def _answer_session(self, src: str, request_id: int, session: LeaderSession, answers: dict[Key, FetchedPartition | None], out: Output) -> None:
        """Answer with the session's partitions that have something new: the `answers` made
        while processing the request, records or an error that came since, or a HWM the follower
        has not had. A partition stays marked for the next fetch unless its follower is at the
        log end (then, unless something changed since it was processed, it is clean: the next
        fetches skip it, fetch_session.py)."""
        parts = []
        for key in [*answers, *(k for k in session.dirty if k not in answers)]:
            answer = answers.get(key)
            if answer is None:
                fp = session.positions.get(key)
                if fp is None:
                    continue  # forgotten since
                replica = self.replicas.get(key)
                if replica is None:
                    answer = FetchedPartition(fp.topic, fp.partition, self._missing_replica_error(key))
                elif replica.has_data_for(fp) or fp.fetch_offset > replica.log.end_offset:
                    answer = replica.read_for_follower(fp)
                elif session.sent_hwm.get(key) != replica.hwm:
                    answer = replica.read_for_follower(fp)  # caught up: only a new HWM to tell
                    session.sent_hwm[key] = answer.high_watermark
                    parts.append(answer)
                    continue
                else:
                    continue
            session.dirty[key] = None  # not caught up, or an error: process it again
            session.sent_hwm[key] = answer.high_watermark
            parts.append(answer)
        out.send(Envelope(self.env.node_id, src, FetchResponse(request_id, tuple(parts), session.session_id)))

    def _answer_parked(self, p: ParkedFetch, out: Output) -> None:
        # A session replaced since means the follower gave up on this fetch: nobody waits for it.
        if self.sessions.get(p.session.follower) is p.session:
            self._answer_session(p.src, p.request.request_id, p.session, p.answers, out)

    def _complete_parked(self, key: Key, now_ms: float, out: Output) -> None:
        """Answer the parked fetches that now have something for partition `key`."""
        if not self.parked:
            return
        replica = self.replicas.get(key)

        def has_data(p: ParkedFetch) -> bool:
            fp = p.session.positions.get(key)
            return fp is not None and (replica is None or replica.has_data_for(fp))

        for p in self.parked.complete(has_data):
            self._answer_parked(p, out)
