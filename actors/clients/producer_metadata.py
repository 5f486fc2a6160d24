"""The producer's view of the cluster: which broker leads each partition, in which leader epoch,
and the topics' ids, refreshed by Metadata requests (Kafka's producer Metadata and
MetadataUpdater). A mixin of ProducerNode (producer.py).

Rules: metadata from a broker that is behind (an older leader epoch) is ignored, as Kafka clients
do; a request unanswered for METADATA_TIMEOUT_MS is sent to the next broker; a topic created again
under a new id loses what the producer knew of the old one (leaders, idempotent sequences); a batch
waiting out its back-off goes at once to a new leader (RecordAccumulator.shouldBackoff).
"""

from __future__ import annotations

from actors.contract import Envelope, Output
from actors.replication.messages import MetadataRequest, MetadataResponse

METADATA_TIMEOUT_MS = 1_000


class ClientMetadata:
    def _refresh_metadata(self, now_ms: float, out: Output) -> None:
        self._now = now_ms
        if self.metadata_request is not None:
            return
        self.next_request_id += 1
        self.metadata_request = (self.next_request_id, now_ms)
        target = self.brokers[self.metadata_broker % len(self.brokers)]
        out.send(Envelope(self.node_id, target, MetadataRequest(self.next_request_id)))

    def _on_metadata(self, resp: MetadataResponse, now_ms: float, out: Output) -> None:
        if self.metadata_request is None or resp.request_id != self.metadata_request[0]:
            return
        self.metadata_request = None
        self.metadata_wanted = False
        for topic in self.topic_ids.learn(resp):
            self._forget_topic(topic)
        for pm in resp.partitions:
            key = (pm.topic, pm.partition)
            # Metadata from a broker that is behind (an older leader epoch) is ignored, as Kafka
            # clients do; a leader we failed to reach is asked again only with newer news.
            known = self.leaders.get(key)
            if known is None or pm.leader_epoch > known[1] or (pm.leader_epoch == known[1] and known[0] is not None):
                self.leaders[key] = (pm.leader, pm.leader_epoch)
        if any(self.leaders.get(k, (None, 0))[0] is None for k, q in self.queues.items() if q):
            self.metadata_wanted = True  # some partition has no leader yet: ask again after a back-off
            self.metadata_broker += 1
        # A batch waiting out its back-off goes at once to a new leader (shouldBackoff: no
        # back-off when the leader changed since the last attempt).
        for key in self.retrying:
            b = self.in_flight[key]
            leader, epoch = self.leaders.get(key, (None, -1))
            if leader is not None and epoch > b.leader_epoch and b.retry_at_ms > now_ms:
                b.retry_at_ms = now_ms
                self.deadlines.schedule(key)

    def _forget_topic(self, topic: str) -> None:
        """The topic was created again: its leaders, their epochs and the idempotent sequences
        known were the old topic's (the new one's leaders hold no state of this producer)."""
        for key in [k for k in self.leaders if k[0] == topic]:
            del self.leaders[key]
        for key in [k for k in self.sequences if k[0] == topic]:
            del self.sequences[key]
