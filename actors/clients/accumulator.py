"""The producer's per-partition queues of records waiting to be batched: when a partition's records
make a batch to send (linger.ms, batch.size), the batch made from them, and the index of their
delivery deadlines (Kafka's RecordAccumulator). A mixin of ProducerNode (producer.py), whose
sender (`_send_ready`) takes the batches.

Invariants: `queued_records` counts the records in all queues; `queue_min_deadline[key]` is a
lower bound of the delivery deadlines of the partition's queued records (exact after an expiry
pass), each pushed on `expiry_heap` when it moved earlier.
"""

from __future__ import annotations

import heapq
from collections import deque

from storage.partition_log import NO_PRODUCER, RecordBatch

from .produce_state import MAX_BATCH_RECORDS, InFlightBatch, PendingRecord, buffered_size, buffered_size_of
from .records import encode_records


class RecordAccumulator:
    def _batch_ready(self, q: deque[PendingRecord], now_ms: float) -> bool:
        """Whether a partition's queued records make a batch to send now (Kafka's
        RecordAccumulator.ready): always with linger.ms 0; else once they fill a batch, once the
        oldest has waited linger.ms, or when no more records are coming soon: the load ended (as
        close() flushes) or its send() is blocked on a full buffer (Kafka: the pool is exhausted)."""
        if self.linger_ms <= 0 or q[0].created_ms + self.linger_ms <= now_ms:
            return True
        load = self.load
        if load is None or load.blocked is not None:
            return True
        if self.batch_size is None:
            return len(q) >= MAX_BATCH_RECORDS
        size = 0
        for r in q:
            size += buffered_size(r.value)
            if size >= self.batch_size:
                return True
        return False

    def _queued(self, key: tuple[str, int], deadline_ms: float, count: int) -> None:
        """`count` records with this delivery deadline were queued for `key`."""
        self.queued_records += count
        self.sendable[key] = None
        known = self.queue_min_deadline.get(key)
        if known is None or deadline_ms < known:
            self.queue_min_deadline[key] = deadline_ms
            heapq.heappush(self.expiry_heap, (deadline_ms, key))
        self.deadlines.schedule(key)

    def _expiry_candidates(self, now_ms: float) -> list[tuple[str, int]]:
        """The partitions whose queued records may include one past its delivery deadline."""
        heap, found = self.expiry_heap, {}
        while heap and heap[0][0] <= now_ms:
            bound, key = heapq.heappop(heap)
            if self.queue_min_deadline.get(key) == bound:
                found[key] = None
        return sorted(found, key=self.queue_order.__getitem__)

    def _queue(self, key: tuple[str, int]) -> deque[PendingRecord]:
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = deque()
            self.queue_order[key] = len(self.queue_order)
        return q

    def _new_batch(self, key: tuple[str, int], q: deque[PendingRecord], now_ms: float) -> InFlightBatch:
        first = q[0]
        records = [q.popleft()]
        if self.batch_size is None:
            while q and len(records) < MAX_BATCH_RECORDS and q[0].acks == first.acks and q[0].idempotent == first.idempotent:
                records.append(q.popleft())
        else:
            # batch.size bounds the batch's bytes (`buffered_size`); one record larger than it
            # still goes, alone, as in Kafka.
            size, limit = buffered_size(first.value), self.batch_size
            while q and q[0].acks == first.acks and q[0].idempotent == first.idempotent:
                size += buffered_size(q[0].value)
                if size > limit:
                    break
                records.append(q.popleft())
        self.queued_records -= len(records)
        values = [r.value for r in records]
        payload = encode_records(self.node_id, [r.sequence for r in records], values)
        batch = RecordBatch.of(payload, len(records), NO_PRODUCER, -1)
        if first.idempotent:
            batch = self._numbered(key, batch)
        self.batches_made += 1
        buffered = buffered_size_of(values)
        return InFlightBatch(records, batch, first.acks, retry_at_ms=now_ms, order=self.batches_made, buffered=buffered)
