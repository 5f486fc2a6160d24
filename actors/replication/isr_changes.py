"""A partition leader's ISR state machine: the Maximal ISR and the replication quorum, shrinking
and expanding the ISR through AlterPartition, retries, and the controller's answers (Kafka's
Partition.maybeShrinkIsr, maybeExpandIsr, prepareIsrShrink/prepareIsrExpand with its
PendingShrinkIsr/PendingExpandIsr states, submitAlterPartition and handleAlterPartitionError). A
mixin of PartitionReplica (replica.py).

Rules (§6.5.2-6.5.4): a follower that has not caught up for replica.lag.time.max.ms leaves the ISR,
one that reached max(local HWM, LESO) with a fetch of the current leader epoch joins it; a proposal
carries the partition epoch and the added replicas' broker epochs (KIP-903); the Maximal ISR
(current + proposed) applies at once, is committed on acceptance and rolled back on refusal; a
refusal as stale waits for the metadata log; no expansion before a recovering leader recovered
(KIP-704); once the ISR is below MinISR, waiting acks=all produces fail (KIP-966).

Invariant: `pending_isr` is None or the proposal in flight; at most one is in flight, and
`alter_attempt` numbers every send of it.
"""

from __future__ import annotations

from actors.contract import Output
from controller_quorum.metadata import RECOVERED, RECOVERING
from controller_quorum.requests import (
    INVALID_UPDATE_VERSION,
    NOT_CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from observability.events import IsrChangeRejected, IsrCommitted, IsrExpandProposed, IsrShrinkProposed

from .follower_fetches import FollowerState
from .messages import FENCED_LEADER_EPOCH, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT

ALTER_PARTITION_RETRY_MS = 1_000
STALE_PROPOSAL_RETRY_MS = 5_000  # after a stale-version refusal, if no metadata update came


class IsrChanges:
    def maximal_isr(self) -> frozenset[int]:
        """§6.5.2: the union of the committed and the proposed ISR."""
        if self.pending_isr is None:
            return frozenset(self.isr)
        return frozenset(self.isr) | frozenset(self.pending_isr)

    def replication_quorum(self) -> frozenset[int]:
        """Whose fetch offsets bound the HWM. With the Maximal ISR: current + proposed. Without it
        (switch off): the leader applies a shrink at once and an expansion only once committed, the
        behaviour §6.5.2 shows losing acknowledged data."""
        if self.env.settings.protocol.maximal_isr or self.pending_isr is None:
            return self.maximal_isr()
        return frozenset(self.isr) & frozenset(self.pending_isr)

    def _isr_eligible(self, broker: int, f: FollowerState) -> bool:
        reg = self.env.image.brokers.get(broker)
        if reg is None or not reg.active:
            return False
        if self.env.settings.protocol.broker_epoch_in_alter_partition and f.broker_epoch != reg.epoch:
            return False
        return True

    def maybe_expand_isr(self, follower: int, now_ms: float, out: Output) -> None:
        """§6.5.3-6.5.4: an out-of-sync follower is in sync once it reached the local HWM and the
        LESO, with a fetch in the current leader epoch."""
        if not self.is_leader or self.pending_isr is not None or follower in self.isr:
            return
        if self.state is not None and self.state.leader_recovery_state == RECOVERING:
            return  # KIP-704: no ISR expansion before the leader recovered
        f = self.followers.get(follower)
        if f is None or f.fetch_epoch != self.leader_epoch:
            return
        if f.leo < self.hwm or f.leo < self.leso:
            return
        if not self._isr_eligible(follower, f):
            return
        out.emit(IsrExpandProposed(self.topic, self.partition, follower, f.leo, self.hwm, self.leso, f.fetch_epoch, self.leader_epoch, topic_id=self.topic_id))
        self._propose_isr(tuple(b for b in self.state.replicas if b in self.isr or b == follower), now_ms, out)

    def maybe_shrink_isr(self, now_ms: float, out: Output) -> None:
        if not self.is_leader or self.pending_isr is not None:
            return
        lag = self.env.settings.config.replica_lag_time_max_ms
        me = self.env.broker_id
        lagging = [b for b in self.isr if b != me and now_ms - self.followers.get(b, FollowerState()).last_caught_up_ms > lag]
        if lagging:
            out.emit(IsrShrinkProposed(self.topic, self.partition, tuple(lagging), topic_id=self.topic_id))
            self._propose_isr(tuple(b for b in self.isr if b not in lagging), now_ms, out)

    def _propose_isr(self, new_isr: tuple[int, ...], now_ms: float, out: Output, recovery: str | None = None) -> None:
        self.pending_isr = new_isr
        self.awaiting_metadata = False
        self.pending_recovery = recovery
        self._send_alter_partition(now_ms, out)
        self.deadline_moved = True
        # The Maximal ISR applies at once; the HWM may move (a shrink without the Maximal ISR).
        self.maybe_advance_high_watermark(now_ms, out)

    def _send_alter_partition(self, now_ms: float, out: Output) -> None:
        me, image = self.env.broker_id, self.env.image
        members = []
        for b in self.pending_isr:
            if b == me:
                epoch = self.env.broker_epoch or -1
            else:
                f = self.followers.get(b)
                reg = image.brokers.get(b)
                epoch = f.broker_epoch if f is not None and f.broker_epoch >= 0 else (reg.epoch if reg else -1)
            members.append((b, epoch))
        state = self.state.leader_recovery_state if self.state else RECOVERED
        self.alter_attempt += 1
        req = AlterPartitionRequest(
            me, self.env.broker_epoch or -1, self.topic, self.partition, self.leader_epoch, self.partition_epoch,
            tuple(members), self.pending_recovery or state, self.alter_attempt,
        )
        self.alter_sent_ms = now_ms
        self.env.send_to_controller(req, out)

    def on_alter_partition_response(self, resp: AlterPartitionResponse, now_ms: float, out: Output) -> None:
        if not self.is_leader or self.pending_isr is None:
            return
        if (resp.request_leader_epoch, resp.request_partition_epoch) != (self.leader_epoch, self.partition_epoch):
            return  # a late answer to a proposal made from an older partition state
        if resp.error is not None and resp.request_attempt not in (-1, self.alter_attempt):
            # A refusal of an attempt since retried: Kafka never delivers it (a retried request's
            # connection is closed), and it may predate the controller's accepting the retry. An
            # acceptance of any attempt is the committed state itself, taken below if newer.
            return
        if resp.error is None and resp.state is not None:
            st = resp.state
            if st.leader_epoch != self.leader_epoch or st.partition_epoch <= self.partition_epoch:
                return  # an answer to an older proposal, or metadata already moved past it
            self.state = st
            self.isr = st.isr
            self.partition_epoch = st.partition_epoch
            self.pending_isr = None
            self.pending_recovery = None
            out.emit(IsrCommitted(self.topic, self.partition, tuple(st.isr), st.partition_epoch, topic_id=self.topic_id))
            self.answer_changed = True  # an ISR expansion may be possible again
            self._after_isr_change(now_ms, out)
        elif resp.error in (NOT_CONTROLLER, REQUEST_TIMED_OUT):
            return  # retried by tick
        elif resp.error in (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH):
            # Our view is stale: the controller's committed state may already hold this very
            # proposal (an earlier attempt whose answer was lost). Keep the Maximal ISR and wait
            # for the metadata log to tell us the committed state, as Kafka does; ask again only
            # after a long pause, in case the refusal came from a controller's uncommitted state
            # that a controller failover since threw away (then no metadata update will come).
            out.emit(IsrChangeRejected(self.topic, self.partition, resp.error, tuple(self.pending_isr), topic_id=self.topic_id))
            self.awaiting_metadata = True
            self.alter_sent_ms = now_ms
        else:
            # Rejected as it stands (an ineligible replica...): the committed state is the one we
            # know, so roll back to it (§6.5.2).
            out.emit(IsrChangeRejected(self.topic, self.partition, resp.error, tuple(self.pending_isr), topic_id=self.topic_id))
            self.pending_isr = None
            self.pending_recovery = None
            self.alter_sent_ms = now_ms
            self.answer_changed = True
            self._maybe_report_quorum(out)

    def _after_isr_change(self, now_ms: float, out: Output) -> None:
        # KIP-966 ("the at-risk data"): once the ISR is below MinISR, pending acks=all requests are
        # negatively acknowledged at once. (Kafka's DelayedProduce keeps them until the HWM passes
        # them or they time out; the reference decides.)
        if self.waiting and len(self.isr) < self.min_isr():
            self._fail_waiting(NOT_ENOUGH_REPLICAS_AFTER_APPEND, out)
        self.maybe_advance_high_watermark(now_ms, out)

    def _alter_retry_ms(self) -> float:
        return STALE_PROPOSAL_RETRY_MS if self.awaiting_metadata else ALTER_PARTITION_RETRY_MS
