"""The scenario's clients, in either runtime: the `produce`, `consume`, `list_offsets` and `load`
steps, and the run's epilogue that completes the history.

Each client is a node of its own (clients never crash in scenarios); a step hands it a command
through a local call (`cluster.invoke`, the client's API) and lets time run until the history says
the command is done (`cluster.run_until` on the cluster view: the records' `produce_ack`s, the
consumer's `consume_done`, its `list_offsets_answer`). Steps never read a client's state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.clients.consumer import ConsumeCommand
from actors.clients.produce_state import ACKS, ProduceCommand
from actors.runtime.api import Consume, ListOffsets, Load, PauseLoad, Produce, StepFailed
from observability.events import LoadStep, ProduceDone
from observability.states import UNKNOWN

if TYPE_CHECKING:
    from .readout import RoleCluster

PRODUCER = "producer"
CONSUMER = "consumer"
# How long past a produce step's own timeout the step waits for the last answers.
SETTLE_MS = 1_000
# The epilogue: how long load consumers get to catch up with the committed log, and the final read
# to read it (a broker that does not answer by then is reported incomplete).
CATCH_UP_MS = 5_000
FINAL_READ_MS = 5_000


class Clients:
    def __init__(self, cluster: RoleCluster) -> None:
        self.cluster = cluster
        self.view = cluster.view()
        self.producers: list[str] = []
        self.consumers: list[str] = []
        self.load_consumers: list[str] = []
        self.next_command = 0
        self._add_producer(PRODUCER)
        self._add_consumer(CONSUMER)

    # --- nodes ------------------------------------------------------------------------------------

    def _add_producer(self, name: str) -> None:
        self.cluster.add_client(name, "producer", producer_id=1_000 + len(self.producers))
        self.producers.append(name)

    def _add_consumer(self, name: str) -> None:
        self.cluster.add_client(name, "consumer")
        self.consumers.append(name)

    # --- steps ----------------------------------------------------------------------------------

    def produce(self, args: Produce) -> None:
        self.next_command += 1
        cid = self.next_command
        values = tuple(args.values) if args.values is not None else tuple(f"m{cid}-{i}" for i in range(args.count))
        cmd = ProduceCommand(cid, args.topic, args.partition, values, ACKS[args.acks], args.idempotent, args.timeout_ms)
        cluster, n = self.cluster, len(values)
        first = cluster.invoke(PRODUCER, lambda role, now: (role.submit(cmd, now), role.commands[cid].first_sequence))

        def settled() -> bool:
            acked, failed, _ = self.view.outcomes(PRODUCER, first, n)
            return acked + failed >= n

        done = cluster.run_until(settled, args.timeout_ms + SETTLE_MS)
        acked, failed, errors = self.view.outcomes(PRODUCER, first, n)
        if not done:
            raise StepFailed(f"produce: {n - acked - failed} records had no outcome after {args.timeout_ms} ms")
        self.cluster.record(ProduceDone(cid, acked, failed, ", ".join(errors) or None))
        if args.expect == "acked" and failed:
            raise StepFailed(f"produce: expected every record acknowledged, {failed} of {n} failed ({', '.join(errors)})")
        if args.expect == "failed" and acked:
            raise StepFailed(f"produce: expected every record to fail, {acked} of {n} were acknowledged")

    def consume(self, args: Consume) -> None:
        self.next_command += 1
        cid = self.next_command
        # As Kafka's tests consume (TestUtils.consumeRecords): until as many records as expected
        # were read, or the step's timeout; `expect_values` expects as many as it lists.
        expect = args.expect_count if args.expect_count is not None or args.expect_values is None else len(args.expect_values)
        cmd = ConsumeCommand(cid, args.topic, args.partition, args.from_offset, expect)
        cluster = self.cluster
        cluster.invoke(CONSUMER, lambda role, now: role.submit(cmd, now))
        cluster.run_until(lambda: cid in self.view.consume_done.get(CONSUMER, {}), args.timeout_ms)
        got = cluster.invoke(CONSUMER, lambda role, now: _stop_reading(role, cid))
        if args.expect_count is not None and len(got) != args.expect_count:
            raise StepFailed(f"consume: expected {args.expect_count} committed records from offset {args.from_offset}, read {len(got)}")
        if args.expect_values is not None and got != list(args.expect_values):
            raise StepFailed(f"consume: expected values {args.expect_values}, read {got}")

    def list_offsets(self, args: ListOffsets, leader: int | None) -> None:
        ref = f"{args.topic}-{args.partition}"
        if leader is None:
            raise StepFailed(f"list_offsets: {ref} has no leader now")
        topic, p = args.topic, args.partition
        cluster = self.cluster
        rid = cluster.invoke(CONSUMER, lambda role, now: (role.ask_latest_offset(topic, p, leader, now), role.last_list_offsets))
        answers = self.view.list_offsets_answers
        if not cluster.run_until(lambda: rid in answers.get(CONSUMER, {}), args.timeout_ms):
            raise StepFailed(f"list_offsets: broker {leader} did not answer within {args.timeout_ms} ms")
        resp = answers[CONSUMER][rid]
        got = "not_available" if resp.error == "OFFSET_NOT_AVAILABLE" else (resp.error or resp.offset)
        if args.accepts is not None and not args.accepts(got):
            raise StepFailed(f"list_offsets {ref} from broker {leader}: expected {args.expected}, got {got}")

    def load(self, args: Load, topics: dict[str, int]) -> None:
        """Start background load: open-loop producers and following consumers, on every partition
        of `args.topics` (default: every topic) as of now: the scenario's `topics`, and those that
        `create_topic` and `create_partitions` steps made, as the committed metadata tells them."""
        existing = {(t, p) for t, count in topics.items() for p in range(count)} | set(self.view.partition_keys())
        names = args.topics or sorted({t for t, _ in existing})
        partitions = [(t, p) for t in names for _, p in sorted(key for key in existing if key[0] == t)]
        if missing := [t for t in names if all(key[0] != t for key in existing)]:
            raise StepFailed(f"load: no topic {', '.join(missing)} exists now")
        cluster = self.cluster
        until = None if args.duration_ms is None else cluster.now_ms + args.duration_ms
        if args.kafka_config is not None:
            self._load_with_kafka_clients(args, partitions, until)
            return
        for i in range(args.producers):
            name = f"load-producer-{len(self.producers)}"
            self._add_producer(name)
            rate = args.rate_per_s / args.producers
            cluster.invoke(name, lambda role, now, rate=rate: role.start_load(
                partitions, rate, args.message_bytes, ACKS[args.acks], now, until, idempotent=args.idempotent,
                buffer_memory=args.buffer_memory, max_block_ms=args.max_block_ms, delivery_timeout_ms=args.delivery_timeout_ms,
                linger_ms=args.linger_ms, batch_size=args.batch_size))
        for i in range(args.consumers):
            name = f"load-consumer-{len(self.consumers)}"
            self._add_consumer(name)
            self.load_consumers.append(name)
            for t, p in partitions:
                self.next_command += 1
                cmd = ConsumeCommand(self.next_command, t, p, 0, None, follow=True)
                cluster.invoke(name, lambda role, now, cmd=cmd: role.submit(cmd, now))
        self.cluster.record(LoadStep(args.producers, args.consumers, args.rate_per_s, len(partitions)))

    def _load_with_kafka_clients(self, args: Load, partitions: list[tuple[str, int]], until: float | None) -> None:
        """`load.client: librdkafka`: each producer and consumer a confluent-kafka client in a node
        of its own (actors/runtime/kafka/load_producer.py, load_consumer.py), against the brokers'
        Kafka listeners; the same names, rows and epilogue as kraftlab's own load clients."""
        cluster, config = self.cluster, dict(args.kafka_config)
        if not getattr(cluster, "bootstrap_servers", None):
            raise StepFailed("load: load.client librdkafka needs the brokers' Kafka listeners (runtime ray)")
        for _ in range(args.producers):
            name = f"load-producer-{len(self.producers)}"
            cluster.add_client(name, "kafka_producer")
            self.producers.append(name)
            rate = args.rate_per_s / args.producers
            cluster.invoke(name, lambda role, now, rate=rate: role.start_load(partitions, rate, args.message_bytes, until, config, now))
        for _ in range(args.consumers):
            name = f"load-consumer-{len(self.consumers)}"
            cluster.add_client(name, "kafka_consumer")
            self.consumers.append(name)
            self.load_consumers.append(name)
            cluster.invoke(name, lambda role, now: role.follow(partitions, config, now))
        self.cluster.record(LoadStep(args.producers, args.consumers, args.rate_per_s, len(partitions)))

    def pause_load(self, args: PauseLoad) -> None:
        """An idle period of the background load: every load producer offers nothing for
        `args.for_ms` (a `load_paused` row each), then goes on at its rate."""
        for name in self.producers:
            if name.startswith("load-producer-"):
                self.cluster.invoke(name, lambda role, now: role.pause_load(now, args.for_ms))

    # --- the epilogue: completing the history ---------------------------------------------------

    def finish(self) -> None:
        """End the run's client activity so that its history can be checked from outside
        (docs/reference/events.md): every producer settles its pending records (one `produce_ack`
        per `produce_send`), load consumers catch up with what is committed now (`consumer_done`
        says whether they did), and, when records were produced, a final read of every partition
        (`final_read`)."""
        cluster = self.cluster
        for name in self.producers:
            cluster.invoke(name, lambda role, now: role.abandon(now))
        # The scenario's topics, then every partition created while the run went on
        # (`create_topic`, `create_partitions`), as the committed metadata tells them.
        partitions = [(t.name, p) for t in cluster.topics for p in range(t.partitions)]
        partitions += sorted(set(self.view.partition_keys()) - set(partitions))
        if self.load_consumers:
            self._catch_up(partitions)
        if self.view.producers:
            self._final_read(partitions)

    def _catch_up(self, partitions: list[tuple[str, int]]) -> None:
        # What each partition has committed as the catch-up begins: its leader's HWM as the view
        # knows it (a partition with no leader: nothing to wait for). A leader that has not made
        # its HWM known yet (just elected) gives the target once it does: until then no consumer
        # has caught up with that partition, so that none counts as complete without reading what
        # was committed there (a consumer that did so made `unseen` flag records it never read).
        target: dict[tuple[str, int], int] = {}
        unknown = set(partitions)

        def learn_targets() -> bool:
            if unknown:
                states = self.view.partitions()
                for t, p in sorted(unknown):
                    state = states.get(f"{t}-{p}")
                    hwm = state.hwm if state is not None else None
                    if hwm is None or isinstance(hwm, int):
                        target[(t, p)] = hwm or 0
                        unknown.discard((t, p))
            return not unknown

        def caught_up_with(name: str) -> dict[tuple[str, int], bool]:
            read_to = self.view.read_to.get(name, {})
            known = learn_targets()
            return {key: known and key in target and read_to.get(key, 0) >= target[key] for key in partitions}

        self.cluster.run_until(lambda: all(all(caught_up_with(n).values()) for n in self.load_consumers), CATCH_UP_MS)
        for name in self.load_consumers:
            done = caught_up_with(name)
            self.cluster.invoke(name, lambda role, now, done=done: role.stop_following(done))

    def _final_read(self, partitions: list[tuple[str, int]]) -> None:
        """Each partition from its acting leader, or, when it has none, from every running
        replica in its ISR or ELR; a partition with none of those running gets an incomplete
        final read from each of them.

        Why only those: a replica outside the ISR and the ELR may hold another lineage (a log of
        an earlier epoch that an unclean election left behind) or a stale prefix with a stale
        HWM; read as the committed log, it shows records as lost that the ISR holds, and hides
        records the partition lost. A member of the ISR or the ELR holds every committed record;
        its read is exactly the committed log when its HWM is its log end (the consumer's
        `_on_final_read` says so in `complete`). So is a leader's once its HWM has reached its
        LESO; below it, the leader cannot tell whether the records of the epochs before its own
        are committed (the protocol description §6.4.2: a partition left under MinISR keeps
        its new leader's HWM there), and its read is incomplete."""
        cluster, view = self.cluster, self.view
        states, brokers = view.partitions(), view.brokers()
        plan: list[tuple[str, int, int, str, bool]] = []
        unreachable: list[tuple[str, int, int]] = []
        for t, p in partitions:
            state = states.get(f"{t}-{p}")
            if state is None:
                continue
            # A leader that does not act as one yet (no HWM: it has not taken over, e.g. back
            # from a crash with no KRaft leader to register with) answers from a log the
            # partition may not keep: read every running replica instead, as with no leader.
            if state.leader is not None and brokers[state.leader].alive and state.hwm is not UNKNOWN:
                leader = view.replicas.get(state.leader, {}).get((t, p))
                plan.append((t, p, state.leader, "leader", leader is None or leader.hwm >= leader.leso))
            else:
                eligible = [b for b in state.replicas if b in state.isr or b in state.elr]
                running = [b for b in eligible if brokers[b].alive]
                if running:
                    plan += [(t, p, b, "replica", True) for b in running]
                else:  # with no ISR and no ELR (unclean recovery pending) no log is the committed one
                    unreachable += [(t, p, b) for b in eligible or state.replicas]
        deadline = cluster.now_ms + FINAL_READ_MS
        before = len(view.final_reads_done)
        for t, p, broker in unreachable:
            cluster.invoke(CONSUMER, lambda role, now, t=t, p=p, broker=broker: role.final_read_unreachable(t, p, broker))
        for t, p, broker, source, exact in plan:
            self.next_command += 1
            cmd = ConsumeCommand(self.next_command, t, p, 0, None, broker=broker, final_source=source, deadline_ms=deadline,
                                 final_exact=exact)
            cluster.invoke(CONSUMER, lambda role, now, cmd=cmd: role.submit(cmd, now))
        expected = len(plan) + len(unreachable)
        cluster.run_until(lambda: len(view.final_reads_done) - before >= expected, FINAL_READ_MS + SETTLE_MS)

    # --- the history's figures ---------------------------------------------------------------------

    def produce_latency(self):
        """Every acknowledged record, handed over -> acknowledged (from the `produce_ack`s)."""
        return self.view.latency

    def load_stats(self) -> dict[str, float] | None:
        return self.view.load_stats()


def _stop_reading(role, command_id: int) -> list:
    """End a consume command (the consumer stops polling) and return what it read."""
    reading = role.readings[command_id]
    reading.done = True
    return list(reading.values)
