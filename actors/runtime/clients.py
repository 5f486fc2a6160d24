"""The scenario's clients, in either runtime: the `produce`, `consume`, `list_offsets` and `load`
steps, and the history counters they feed (acked, failed, acked_lost, consumed).

Each client is a node of its own (clients never crash in scenarios); a step hands it a command
through a local call (`cluster.invoke`) and lets time run until the command is done
(`cluster.run_until`). Progress is always read from `cluster.role(name)` afresh: in the simulator
that is the live role, on Ray the newest copy the driver collected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.clients.consumer import ConsumeCommand
from actors.clients.latency import LatencyHistogram
from actors.clients.producer import ACKS, ProduceCommand
from kraftlab.scenario.schema import split_partition_ref
from workloads.conditions import matches
from workloads.runtime_api import StepFailed

if TYPE_CHECKING:
    from .readout import RoleCluster

PRODUCER = "producer"
CONSUMER = "consumer"
# How long past a produce step's own timeout the step waits for the last answers.
SETTLE_MS = 1_000


class Clients:
    def __init__(self, cluster: RoleCluster) -> None:
        self.cluster = cluster
        self.brokers = [f"b{i}" for i in range(1, cluster.settings.brokers + 1)]
        self.producers: list[str] = []
        self.consumers: list[str] = []
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

    def role(self, name: str) -> Any:
        return self.cluster.role(name)

    # --- steps ----------------------------------------------------------------------------------

    def produce(self, args) -> None:
        self.next_command += 1
        cid = self.next_command
        values = tuple(args.values) if args.values is not None else tuple(f"m{cid}-{i}" for i in range(args.count))
        cmd = ProduceCommand(cid, args.topic, args.partition, values, ACKS[args.acks], args.idempotent, args.timeout_ms)
        cluster = self.cluster
        cluster.invoke(PRODUCER, lambda role, now: role.submit(cmd, now))
        done = cluster.run_until(lambda: self.role(PRODUCER).commands[cid].done, args.timeout_ms + SETTLE_MS)
        progress = self.role(PRODUCER).commands[cid]
        if not done:
            raise StepFailed(f"produce: {len(values) - progress.acked - progress.failed} records had no outcome after {args.timeout_ms} ms")
        self.cluster.record("produce_done", command=cid, acked=progress.acked, failed=progress.failed, errors=progress.errors)
        if args.expect == "acked" and progress.failed:
            raise StepFailed(f"produce: expected every record acknowledged, {progress.failed} of {len(values)} failed ({', '.join(progress.errors)})")
        if args.expect == "failed" and progress.acked:
            raise StepFailed(f"produce: expected every record to fail, {progress.acked} of {len(values)} were acknowledged")

    def consume(self, args) -> None:
        self.next_command += 1
        cid = self.next_command
        cmd = ConsumeCommand(cid, args.topic, args.partition, args.from_offset, args.expect_count)
        cluster = self.cluster
        cluster.invoke(CONSUMER, lambda role, now: role.submit(cmd, now))
        cluster.run_until(lambda: self.role(CONSUMER).readings[cid].done, args.timeout_ms)
        got = cluster.invoke(CONSUMER, lambda role, now: _stop_reading(role, cid))
        self.cluster.record("consume_done", command=cid, count=len(got))
        if args.expect_count is not None and len(got) != args.expect_count:
            raise StepFailed(f"consume: expected {args.expect_count} committed records from offset {args.from_offset}, read {len(got)}")
        if args.expect_values is not None and got != list(args.expect_values):
            raise StepFailed(f"consume: expected values {args.expect_values}, read {got}")

    def list_offsets(self, args, leader: int | None) -> None:
        if leader is None:
            raise StepFailed(f"list_offsets: {args.partition} has no leader now")
        topic, p = split_partition_ref(args.partition)
        cluster = self.cluster
        cluster.invoke(CONSUMER, lambda role, now: role.ask_latest_offset(topic, p, leader, now))
        rid = self.role(CONSUMER).last_list_offsets
        if not cluster.run_until(lambda: self.role(CONSUMER).list_offsets[rid] is not None, args.timeout_ms):
            raise StepFailed(f"list_offsets: broker {leader} did not answer within {args.timeout_ms} ms")
        resp = cluster.invoke(CONSUMER, lambda role, now: role.list_offsets.pop(rid))
        got = "not_available" if resp.error == "OFFSET_NOT_AVAILABLE" else (resp.error or resp.offset)
        self.cluster.record("list_offsets_done", partition=args.partition, broker=leader, answer=got)
        expected = args.expect
        if expected == "any":
            return
        ok = got == expected if isinstance(expected, str) or isinstance(got, str) else matches(expected, got, "offset")
        if not ok:
            raise StepFailed(f"list_offsets {args.partition} from broker {leader}: expected {expected}, got {got}")

    def load(self, args, topics: dict[str, int]) -> None:
        """Start background load: open-loop producers and following consumers."""
        names = args.topics or sorted(topics)
        partitions = [(t, p) for t in names for p in range(topics[t])]
        cluster = self.cluster
        until = None if args.duration_ms is None else cluster.now_ms + args.duration_ms
        for i in range(args.producers):
            name = f"load-producer-{len(self.producers)}"
            self._add_producer(name)
            rate = args.rate_per_s / args.producers
            cluster.invoke(name, lambda role, now, rate=rate: role.start_load(partitions, rate, args.message_bytes, ACKS[args.acks], now, until))
        for i in range(args.consumers):
            name = f"load-consumer-{len(self.consumers)}"
            self._add_consumer(name)
            for t, p in partitions:
                self.next_command += 1
                cmd = ConsumeCommand(self.next_command, t, p, 0, None, follow=True)
                cluster.invoke(name, lambda role, now, cmd=cmd: role.submit(cmd, now))
        self.cluster.record("load_started", producers=args.producers, consumers=args.consumers, rate_per_s=args.rate_per_s, partitions=len(partitions))

    # --- history --------------------------------------------------------------------------------

    def acked_batches(self):
        for name in self.producers:
            role = self.role(name)
            if role is not None:
                yield from role.acked_batches

    def counters(self, *, with_lost: bool = True) -> dict[str, int]:
        acked = failed = consumed = 0
        for name in self.producers:
            role = self.role(name)
            if role is not None:
                acked += role.acked
                failed += role.failed
        for name in self.consumers:
            role = self.role(name)
            if role is not None:
                consumed += role.consumed
        out = {"acked": acked, "failed": failed, "consumed": consumed}
        if with_lost:
            out["acked_lost"] = self.acked_lost()  # a scan of every acknowledged batch
        return out

    def produce_latency(self) -> LatencyHistogram:
        """Every producer's acknowledged records, handed over -> acknowledged."""
        merged = LatencyHistogram()
        for name in self.producers:
            role = self.role(name)
            if role is not None:
                merged.add(role.latency)
        return merged

    def load_stats(self) -> dict[str, float] | None:
        """What the background load achieved: records acknowledged and failed, and acknowledged
        records per second of load (from its start to its end, or to now). None without load."""
        now = self.cluster.now_ms
        acked = failed = 0
        windows = []
        for name in self.producers:
            role = self.role(name)
            plan = None if role is None else role.last_load
            if plan is None:
                continue
            progress = role.commands[plan.command_id]
            acked += progress.acked
            failed += progress.failed
            windows.append((plan.start_ms, now if plan.until_ms is None else min(plan.until_ms, now)))
        if not windows:
            return None
        duration_ms = max(max(end for _, end in windows) - min(start for start, _ in windows), 1.0)
        return {"acked": acked, "failed": failed, "duration_ms": round(duration_ms, 1), "acked_per_s": round(acked * 1000.0 / duration_ms, 1)}

    def acked_lost(self) -> int:
        """Acknowledged acks=all records missing from the partition's log now: the current
        leader's, or, while the partition is offline, every running replica's."""
        lost = 0
        logs = self.cluster.partition_logs()
        for b in self.acked_batches():
            if b.acks != -1:
                continue
            leader_log, replica_logs = logs.get((b.topic, b.partition), (None, []))
            candidates = [leader_log] if leader_log is not None else replica_logs
            if not any(log.holds(b.base_offset, b.count, b.crc) for log in candidates):
                lost += b.count
        return lost




def _stop_reading(role, command_id: int) -> list:
    """End a consume command (the consumer stops polling) and return what it read."""
    reading = role.readings[command_id]
    reading.done = True
    return list(reading.values)
