"""The idempotent producer's numbering: its producer id and each partition's next sequence, and the
reset after a failure (Kafka's TransactionManager for an idempotent producer: sequence numbers per
partition, and bumpIdempotentEpochAndResetIdIfNeeded, KIP-360). A mixin of ProducerNode
(producer.py).
"""

from __future__ import annotations

from dataclasses import replace

from storage.partition_log import RecordBatch

from .produce_state import InFlightBatch

# An idempotent producer's id after its n-th sequence reset: its first id + n * this (client ids
# are 1000 + their number, so no two producers ever share one).
PRODUCER_ID_STRIDE = 1_000_000


class Idempotence:
    def _numbered(self, key: tuple[str, int], batch: RecordBatch) -> RecordBatch:
        """The batch with the current producer id and the partition's next sequences."""
        seq = self.sequences.get(key, 0)
        self.sequences[key] = seq + batch.count
        return replace(batch, producer_id=self.idempotent_id, base_sequence=seq)

    def _reset_sequences(self, b: InFlightBatch) -> None:
        """An idempotent batch failed, or was refused as out of order: the leader may or may not
        hold its sequences, so the partition's next batch could never be in sequence (each would be
        refused with OUT_OF_ORDER_SEQUENCE_NUMBER). As Kafka's idempotent producer bumps its epoch
        and numbers every partition from 0 again (KIP-360), this one takes a new producer id, of
        which no leader has a state. Once per failure: a batch made before the last reset (another
        partition's, still in flight under the old id) resets nothing."""
        if b.batch.producer_id != self.idempotent_id:
            return
        self.sequence_resets += 1
        self.idempotent_id = self.producer_id + PRODUCER_ID_STRIDE * self.sequence_resets
        self.sequences = {}
