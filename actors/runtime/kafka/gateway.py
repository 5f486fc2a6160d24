"""One Kafka client connection to a broker: its requests turned into the broker role's messages,
and the role's answers into Kafka's responses.

The broker's role answers Kafka's requests as it answers kraftlab's clients, so that a real
client meets the same protocol, faults and checks:
- Produce: each partition's record set is checked (batches.py) and appended through the role's
  produce path (`ProduceRequest`, acks 0, 1 or all); the records get an identity (a producer
  name and a sequence each), recorded as `produce_send` and, with the answer, `produce_ack` rows:
  an acknowledged record later missing counts in `acked_lost` as a kraftlab producer's would. An
  idempotent client's batch takes its identity from what it carries (its producer id, epoch,
  partition and sequences, `batch_identity`), so that a retry, on this connection or another
  broker's, is the same records: the leader answers it as a duplicate with the original's offset,
  and the history's ack names the batch the log holds. Other batches take the connection's
  producer name and its next sequences: a retry of theirs is a new write (Kafka's duplicate).
- Fetch: the role's consumer read (`FetchRequest` with Kafka's consumer replica id: whole
  batches below the leader's HWM, refused when the client's current leader epoch is not the
  leader's, KIP-320); the listener long-polls, asking again until records come or the request's
  `max_wait_ms` ends.
- OffsetForLeaderEpoch: the role's answer (`EpochEndOffsetRequest`): where the leader's log ends
  for an epoch, how a consumer finds a truncation.
- InitProducerId: a producer id for the idempotent producer, from the broker's port.
- ListOffsets: latest is the role's answer (the HWM, or OFFSET_NOT_AVAILABLE while the new leader's
  HWM may be stale, §6.4.2); earliest is offset 0 once the role confirms it leads (kraftlab's logs
  start at 0: nothing is deleted).
- Metadata: from the broker's metadata image (its MetadataCache), with every broker's listener.
- ApiVersions: the table in apis.py.
- The admin APIs (admin.py): forwarded to the active controller through the broker role (KIP-590);
  DescribeConfigs from the broker's metadata image.

A load client (`load.client: librdkafka`, its client.id marked as load_identity.py says) names its
records itself in a header: the listener appends them under that identity and leaves their
`produce_send` and `produce_ack` rows to the client, which writes them from its delivery reports
(what it was told, as Jepsen counts a client's operations); the listener writes instead which
batch of the log each of its batches became (`load_batch_appended`) and which batches it served a
load consumer (`load_batch_served`), for the history's readers to judge the client's rows by.

Every request answered is a `kafka_request` row of the history. The gateway does no I/O: the
listener feeds it frames and writes what it returns; the role is reached through `BrokerPort`.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from kafka.protocol.admin.cluster import DescribeClusterResponse
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsResponse, OffsetForLeaderEpochResponse
from kafka.protocol.metadata.api_versions import ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataResponse
from kafka.protocol.producer.produce import ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdResponse

from actors.replication.messages import CONSUMER, EpochEndOffsetRequest, FetchPartition
from actors.replication.messages import FetchRequest as RoleFetch
from actors.replication.messages import ListOffsetsRequest as RoleListOffsets
from actors.replication.messages import ProduceRequest as RoleProduce
from observability.events import KafkaRequest, LoadBatchAppended, LoadBatchServed, ProduceAck, ProduceSend

from . import admin
from .admin import ConfigView
from .apis import (
    ADMIN_APIS,
    API_VERSIONS,
    APIS,
    DESCRIBE_CLUSTER,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    PRODUCE_REFUSED_BELOW,
    error_code,
)
from .batches import BatchError, batch_identity, split_batches, to_kafka, to_kraftlab
from .load_identity import load_client, load_identity

ACKS_NAMES = {-1: "all", 0: "0", 1: "1"}
EARLIEST, LATEST = -2, -1
# How long a long-polling fetch waits between two reads of the log.
FETCH_POLL_MS = 50.0
# Errors a produce gets before its records could be appended (they are surely not written); any
# other error leaves the outcome unknown ("info"), as kraftlab's producer records it.
NOT_APPENDED = {"NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PARTITION", "KAFKA_STORAGE_ERROR",
                "OUT_OF_ORDER_SEQUENCE_NUMBER", "CORRUPT_MESSAGE", "UNSUPPORTED_COMPRESSION_TYPE", "INVALID_RECORD",
                "UNSUPPORTED_VERSION"}


class PartitionView(NamedTuple):
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterView(NamedTuple):
    """What a broker's metadata image says, as Metadata answers it."""

    topics: dict[str, Any]  # name -> topic id (a uuid.UUID)
    partitions: dict[tuple[str, int], PartitionView]
    brokers: tuple[int, ...]  # unfenced


class BrokerPort(Protocol):
    """The broker a gateway serves, in its own process."""

    broker_id: int
    listeners: dict[int, tuple[str, int]]  # every broker's Kafka listener: id -> (host, port)

    def now_ms(self) -> float: ...
    def new_producer_id(self) -> int: ...
    def deliver(self, src: str, message: object) -> None: ...
    def cluster_view(self) -> ClusterView: ...
    def topic_id(self, topic: str) -> str | None: ...
    def configs(self) -> ConfigView: ...
    def record(self, event: object) -> None: ...


__all__ = ["BrokerPort", "ClusterView", "ConfigView", "Connection", "Gateway", "PartitionView", "UnknownApi"]


class UnknownApi(Exception):
    """A request the listener cannot answer (an API or version it does not serve, or one it
    cannot parse): Kafka closes the connection."""


@dataclass
class Connection:
    """One client connection: its address, the role-level name its requests come from, and the
    identity given to the records it produces."""

    peer: str  # host:port of the client
    name: str  # the role's `src` for its requests; answers come back addressed to it
    producer: str  # the producer name of its records in the history
    next_sequence: int = 0
    # Per idempotent producer identity (batches.batch_identity), the sequence after the last batch
    # this connection wrote a `produce_send` row for: a batch below it is a retry. Kafka's
    # sequences only grow within a producer epoch and partition, so one number per identity
    # bounds this by the identities, not the batches.
    sent_until: dict[str, int] = field(default_factory=dict)
    next_request_id: int = 0
    waiting: dict[int, asyncio.Future] = field(default_factory=dict)


class Gateway:
    def __init__(self, port: BrokerPort, connection: Connection) -> None:
        self.port = port
        self.conn = connection

    # --- the role's answers -----------------------------------------------------------------------

    def on_reply(self, message: Any) -> None:
        """An answer of the role addressed to this connection (one per request id)."""
        parts = getattr(message, "parts", None)
        for reply in parts if parts is not None else (message,):
            future = self.conn.waiting.pop(reply.request_id, None)
            if future is not None and not future.done():
                future.set_result(reply)

    def close(self) -> None:
        for future in self.conn.waiting.values():
            if not future.done():
                future.cancel()
        self.conn.waiting.clear()

    def _ask(self, make: Callable[[int], object]) -> asyncio.Future:
        request_id = self.conn.next_request_id
        self.conn.next_request_id += 1
        future = asyncio.get_running_loop().create_future()
        self.conn.waiting[request_id] = future
        self.port.deliver(self.conn.name, make(request_id))
        return future

    # --- requests -----------------------------------------------------------------------------------

    async def handle(self, frame: bytes) -> bytes | None:
        """The response to one request frame (without its size prefix), or None when Kafka sends
        none (a produce with acks=0). Raises UnknownApi for an API not served."""
        if len(frame) < 8:
            raise UnknownApi(f"a request of {len(frame)} bytes has no header")
        api_key, api_version = struct.unpack_from(">hh", frame, 0)
        api = APIS.get(api_key)
        if api is None:
            raise UnknownApi(f"API key {api_key} is not served")
        if api_key == API_VERSIONS:
            return self._api_versions(frame, api_version)
        if not api.min_version <= api_version <= api.max_version or (api_key == PRODUCE and api_version < PRODUCE_REFUSED_BELOW):
            raise UnknownApi(f"{api.name} v{api_version} is not served (versions {api.min_version}-{api.max_version})")
        try:
            request = api.request[api_version].decode(frame, header=True)
        except Exception as e:  # noqa: BLE001 - any malformed field: Kafka's InvalidRequestException closes the connection
            raise UnknownApi(f"{api.name} v{api_version}: unparseable ({type(e).__name__}: {e})") from None
        header = request.header
        if api_key == METADATA:
            response = self._metadata(request, api_version)
        elif api_key == PRODUCE:
            response = await self._produce(request, api_version)
            if response is None:
                return None
        elif api_key == FETCH:
            response = await self._fetch(request, api_version)
        elif api_key == INIT_PRODUCER_ID:
            response = self._init_producer_id(request, api_version)
        elif api_key == DESCRIBE_CLUSTER:
            response = self._describe_cluster(api_version)
        elif api_key in ADMIN_APIS:
            response = await admin.answer(self, api_key, request, api_version)
        elif api_key == OFFSET_FOR_LEADER_EPOCH:
            response = await self._offset_for_leader_epoch(request, api_version)
        else:
            assert api_key == LIST_OFFSETS
            response = await self._list_offsets(request, api_version)
        response.with_header(header.correlation_id)
        return bytes(response.encode(header=True))

    def _row(self, api: str, version: int, topic: str | None = None, partition: int | None = None, error: str | None = None,
             offset: int | None = None, count: int | None = None, producer: str | None = None) -> None:
        self.port.record(KafkaRequest(self.conn.peer, api, version, topic, partition, error, offset, count,
                                      (producer or self.conn.producer) if api == "Produce" else None))

    def _api_versions(self, frame: bytes, version: int) -> bytes:
        """Kafka's rule for a version it does not know: answer in v0 with UNSUPPORTED_VERSION and
        the table, so that the client picks one both know."""
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        supported = APIS[API_VERSIONS]
        answer_version = version if supported.min_version <= version <= supported.max_version else 0
        error = None if answer_version == version else "UNSUPPORTED_VERSION"
        keys = [ApiVersionsResponse.ApiVersion(api_key=key, min_version=api.min_version, max_version=api.max_version)
                for key, api in sorted(APIS.items())]
        response = ApiVersionsResponse(version=answer_version, error_code=error_code(error), api_keys=keys, throttle_time_ms=0)
        response.with_header(correlation_id)
        self._row("ApiVersions", version, error=error)
        return bytes(response.encode(header=True))

    def _metadata(self, request: Any, version: int) -> Any:
        view = self.port.cluster_view()
        wanted = None if request.topics is None or (version == 0 and not request.topics) else [t.name for t in request.topics]
        names = sorted(view.topics) if wanted is None else wanted
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b, host=self.port.listeners[b][0], port=self.port.listeners[b][1], rack=None)
                   for b in view.brokers if b in self.port.listeners]
        topics = []
        for name in names:
            if name not in view.topics:
                topics.append(MetadataResponse.MetadataResponseTopic(error_code=error_code("UNKNOWN_TOPIC_OR_PARTITION"), name=name,
                                                                     is_internal=False, partitions=[]))
                continue
            parts = []
            for (topic, index), p in sorted(view.partitions.items()):
                if topic != name:
                    continue
                error = None if p.leader is not None and p.leader in view.brokers else "LEADER_NOT_AVAILABLE"
                parts.append(MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=error_code(error), partition_index=index, leader_id=p.leader if p.leader is not None else -1,
                    leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=[]))
            topics.append(MetadataResponse.MetadataResponseTopic(error_code=0, name=name, topic_id=view.topics[name], is_internal=False,
                                                                 partitions=parts))
        self._row("Metadata", version)
        return MetadataResponse(version=version, throttle_time_ms=0, brokers=brokers, cluster_id="kraftlab",
                                controller_id=self.port.broker_id, topics=topics)

    async def _produce(self, request: Any, version: int) -> Any | None:
        acks, timeout_ms = request.acks, request.timeout_ms
        # A load client (load_identity.py) names its records itself and writes their
        # `produce_send` and `produce_ack` rows from what it is told: the listener keeps the
        # records' identity and says only which batch of the log they went to.
        from_load = load_client(request.header.client_id) is not None
        names: dict[tuple[str, int], str] = {}  # a load client's producer name, per partition
        asks: list[tuple[str, int, list[Any]]] = []
        answers: dict[tuple[str, int], tuple[str | None, int]] = {}
        for topic_data in request.topic_data:
            for part in topic_data.partition_data:
                key = (topic_data.name, part.index)
                try:
                    batches = split_batches(part.records)
                except BatchError as e:
                    answers[key] = (e.error, -1)
                    self._row("Produce", version, key[0], key[1], e.error)
                    continue
                futures = []
                for batch in batches:
                    named = load_identity(batch.raw) if from_load else None
                    if named is not None:
                        producer, listed = named
                        names[key] = producer
                        sequences = tuple(listed)
                    else:
                        identity = batch_identity(batch, key)
                        if identity is None:  # the connection's records: never a retry of its own
                            producer, first, retry = self.conn.producer, self.conn.next_sequence, False
                            self.conn.next_sequence += batch.count
                        else:  # one send row per batch: a retry on this connection is the same send
                            producer, first = identity
                            retry = first < self.conn.sent_until.get(producer, 0)
                            if not retry:
                                self.conn.sent_until[producer] = first + batch.count
                        sequences = tuple(range(first, first + batch.count))
                        if not retry:
                            # The rows name the topic by the id the broker's metadata has for it
                            # (as a kraftlab producer's rows name the one its metadata has): the
                            # readers key records by it.
                            self.port.record(ProduceSend(producer, key[0], key[1], ACKS_NAMES.get(acks, str(acks)), sequences,
                                                         self.port.topic_id(key[0])))
                    kraftlab_batch = to_kraftlab(batch, producer, list(sequences))
                    sent_ms = self.port.now_ms()
                    future = self._ask(lambda rid, k=key, b=kraftlab_batch: RoleProduce(rid, k[0], k[1], acks, timeout_ms, b))
                    futures.append((future, producer, sequences, sent_ms, kraftlab_batch.crc, named is not None))
                asks.append((key[0], key[1], futures))
        if acks == 0:
            for topic, partition, futures in asks:
                for _future, producer, sequences, sent_ms, crc, loaded in futures:
                    if not loaded:
                        self.port.record(ProduceAck(producer, topic, partition, "0", "ok", sequences,
                                                    tuple(0.0 for _ in sequences), topic_id=self.port.topic_id(topic)))
                self._row("Produce", version, topic, partition, None, None, sum(len(f[2]) for f in futures), names.get((topic, partition)))
            return None
        for topic, partition, futures in asks:
            error, base = None, -1
            for i, (future, producer, sequences, sent_ms, crc, loaded) in enumerate(futures):
                reply = await future
                latency = self.port.now_ms() - sent_ms
                ok = reply.error is None
                outcome = "ok" if ok else "fail" if reply.error in NOT_APPENDED else "info"
                topic_id = reply.topic_id or self.port.topic_id(topic)
                if loaded and ok:
                    self.port.record(LoadBatchAppended(producer, topic, partition, reply.base_offset, len(sequences), crc,
                                                       sequences, topic_id))
                elif not loaded:
                    self.port.record(ProduceAck(producer, topic, partition, ACKS_NAMES[acks], outcome, sequences,
                                                tuple(latency for _ in sequences), reply.base_offset if ok else None, crc if ok else None,
                                                error=reply.error, topic_id=topic_id))
                if i == 0:
                    base = reply.base_offset
                error = error or reply.error
            answers[(topic, partition)] = (error, base if error is None else -1)
            self._row("Produce", version, topic, partition, error, base if error is None else None, sum(len(f[2]) for f in futures),
                      names.get((topic, partition)))
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), (error, base) in answers.items():
            by_topic.setdefault(topic, []).append(ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                index=partition, error_code=error_code(error), base_offset=base, log_append_time_ms=-1, log_start_offset=0,
                record_errors=[], error_message=None))
        return ProduceResponse(version=version, throttle_time_ms=0,
                               responses=[ProduceResponse.TopicProduceResponse(name=t, partition_responses=p) for t, p in by_topic.items()])

    def _describe_cluster(self, version: int) -> Any:
        """The brokers (unfenced, with their listeners), as Metadata names them; the controller id
        is this broker's, as a KRaft broker answers (clients reach the controller through it)."""
        view = self.port.cluster_view()
        brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=b, host=self.port.listeners[b][0], port=self.port.listeners[b][1],
                                                                 rack=None) for b in view.brokers if b in self.port.listeners]
        self._row("DescribeCluster", version)
        return DescribeClusterResponse(version=version, throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                                       cluster_id="kraftlab", controller_id=self.port.broker_id, brokers=brokers)

    def _init_producer_id(self, request: Any, version: int) -> Any:
        """A producer id for an idempotent producer, epoch 0 (Kafka's broker takes a block of ids
        from the controller; here each broker's listener hands out ids of its own, unique in the
        run). Transactions are out of scope: a transactional id is refused."""
        if request.transactional_id:
            error, producer_id = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1
        else:
            error, producer_id = None, self.port.new_producer_id()
        self._row("InitProducerId", version, error=error, offset=producer_id if error is None else None)
        return InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=error_code(error), producer_id=producer_id,
                                      producer_epoch=0 if error is None else -1)

    async def _fetch(self, request: Any, version: int) -> Any:
        wanted = [FetchPartition(t.topic, p.partition, p.current_leader_epoch if version >= 9 else -1, p.fetch_offset)
                  for t in request.topics for p in t.partitions]
        deadline = self.port.now_ms() + max(0, request.max_wait_ms)
        while True:
            reply = await self._ask(lambda rid: RoleFetch(rid, CONSUMER, -1, 0, tuple(wanted)))
            has_data = any(p.batches or p.error is not None or p.diverging_epoch is not None for p in reply.partitions)
            if has_data or self.port.now_ms() + FETCH_POLL_MS > deadline or not wanted:
                break
            await asyncio.sleep(FETCH_POLL_MS / 1000.0)
        by_topic: dict[str, list[Any]] = {}
        consumer = load_client(request.header.client_id)
        for p in reply.partitions:
            records = b"".join(to_kafka(b) for b in p.batches)
            if consumer is not None:
                # What a load consumer's `consume` rows are judged against (load_join.py).
                for b in p.batches:
                    self.port.record(LoadBatchServed(consumer, p.topic, p.partition, b.base_offset, b.count, b.crc, p.topic_id))
            data = FetchResponse.FetchableTopicResponse.PartitionData(
                partition_index=p.partition, error_code=error_code(p.error), high_watermark=p.high_watermark,
                last_stable_offset=p.high_watermark, log_start_offset=0, aborted_transactions=None if version >= 4 else [],
                preferred_read_replica=-1, records=records)
            if p.diverging_epoch is not None and version >= 12:
                data.diverging_epoch = FetchResponse.FetchableTopicResponse.PartitionData.EpochEndOffset(
                    epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1])
            by_topic.setdefault(p.topic, []).append(data)
            self._row("Fetch", version, p.topic, p.partition, p.error, p.batches[0].base_offset if p.batches else None,
                      sum(b.count for b in p.batches))
        return FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                             responses=[FetchResponse.FetchableTopicResponse(topic=t, partitions=ps) for t, ps in by_topic.items()])

    async def _offset_for_leader_epoch(self, request: Any, version: int) -> Any:
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                reply = await self._ask(lambda rid, name=t.topic, q=p: EpochEndOffsetRequest(rid, name, q.partition, q.current_leader_epoch,
                                                                                              q.leader_epoch))
                parts.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset(
                    error_code=error_code(reply.error), partition=p.partition, leader_epoch=reply.leader_epoch, end_offset=reply.end_offset))
                self._row("OffsetForLeaderEpoch", version, t.topic, p.partition, reply.error, reply.end_offset if reply.error is None else None)
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)

    async def _list_offsets(self, request: Any, version: int) -> Any:
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                reply = await self._ask(lambda rid, name=t.name, index=p.partition_index: RoleListOffsets(rid, name, index))
                error, offset = reply.error, reply.offset
                if error is None and p.timestamp == EARLIEST:
                    offset = 0
                elif error is None and p.timestamp != LATEST:
                    offset = -1  # no record has a timestamp in kraftlab's logs: none is at or after it
                parts.append(ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=error_code(error), timestamp=-1,
                    offset=offset if error is None else -1, leader_epoch=-1))
                self._row("ListOffsets", version, t.name, p.partition_index, error, offset if error is None else None)
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)

