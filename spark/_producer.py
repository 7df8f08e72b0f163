"""A small batching producer for the Spark sink (runs in Spark executors; no pyspark).

Records are grouped per topic-partition into RecordBatch v2 batches of up to
``batch_size`` bytes; each Produce request carries at most one batch per
partition (up to ``max_request_size``) and waits for ``acks`` (all by default).
Like Kafka's producer (idempotence on by default) it asks for a producer id
and numbers each partition's batches, so a request retried after a lost
connection is not written twice. Keyed records go to murmur2(key) % partitions,
keyless ones to a sticky partition that changes after each batch. Any error
that survives the retries is raised: Spark fails the task.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict

from kafka_sidecar.client import KafkaClientError

from ._options import SinkOptions
from ._records import build_batch, partition_for_key, record_size_upper_bound
from ._wire import RETRIABLE, Broker, KafkaError, TopicPartition, error_name

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]


class ProducerError(RuntimeError):
    pass


class BatchingProducer:
    def __init__(self, options: SinkOptions, client_id: str = "kafka-sidecar-spark-producer") -> None:
        self.options = options
        self.broker = Broker(options.bootstrap, client_id=client_id, timeout=options.timeout_ms / 1000 + 5)
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.buffers: dict[TopicPartition, list[Record]] = defaultdict(list)
        self.buffer_bytes: dict[TopicPartition, int] = defaultdict(int)
        self.sequences: dict[TopicPartition, int] = defaultdict(int)
        self.producer_id, self.producer_epoch = (-1, -1)
        self.sent_records = 0
        if options.idempotent:
            self.broker.metadata([])
            self.producer_id, self.producer_epoch = self.broker.init_producer_id()

    def close(self) -> None:
        self.broker.close()

    # ---- records ---------------------------------------------------------------------

    def _partitions(self, topic: str) -> int:
        n = self.partition_counts.get(topic)
        if n is None:
            metas = self.broker.wait_for_topics([topic], auto_create=True)
            n = len(metas[topic].leaders)
            self.partition_counts[topic] = n
        return n

    def send(self, topic: str | None, partition: int | None, key: bytes | None, value: bytes | None,
             headers: list[tuple[str, bytes | None]] | None = None, timestamp_ms: int | None = None) -> None:
        if topic is None:
            raise ProducerError("null topic present in the data. Use the topic option for setting a topic.")
        n = self._partitions(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, n)
            else:
                partition = self.sticky.get(topic)
                if partition is None:
                    partition = self.sticky[topic] = random.randrange(n)
        elif not 0 <= partition < n:
            raise ProducerError(f"Invalid partition given with record: {partition} is not in the range [0...{n}).")
        size = record_size_upper_bound(key, value, headers)
        if size + 61 > self.options.max_request_size:
            raise ProducerError(
                f"The message is {size} bytes when serialized which is larger than {self.options.max_request_size}, "
                "which is the value of the max.request.size configuration."
            )
        tp = (topic, partition)
        if self.buffer_bytes[tp] and self.buffer_bytes[tp] + size > self.options.batch_size:
            self._send_ready(tp)
        self.buffers[tp].append((key, value, headers, int(time.time() * 1000) if timestamp_ms is None else timestamp_ms))
        self.buffer_bytes[tp] += size
        if self.buffer_bytes[tp] >= self.options.batch_size:
            self._send_ready(tp)

    def flush(self) -> None:
        """Send everything buffered and wait for the acknowledgements."""
        while any(self.buffers.values()):
            first = next(tp for tp, recs in self.buffers.items() if recs)
            self._send_ready(first)

    # ---- requests --------------------------------------------------------------------

    def _send_ready(self, trigger: TopicPartition) -> None:
        """One request to ``trigger``'s leader with its batch and the other full-enough
        batches for the same leader (one batch per partition, within max.request.size)."""
        leader = self.broker.leader(*trigger)
        chosen = [trigger]
        total = self.buffer_bytes[trigger]
        for tp, recs in self.buffers.items():
            if tp == trigger or not recs:
                continue
            if self.broker.leader(*tp) != leader or total + self.buffer_bytes[tp] > self.options.max_request_size:
                continue
            chosen.append(tp)
            total += self.buffer_bytes[tp]
        batches: dict[TopicPartition, bytes] = {}
        counts: dict[TopicPartition, int] = {}
        for tp in chosen:
            recs = self.buffers.pop(tp)
            self.buffer_bytes.pop(tp, None)
            batches[tp] = build_batch(
                recs,
                compression=self.options.compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.sequences[tp] if self.options.idempotent else -1,
            )
            counts[tp] = len(recs)
            if tp[1] == self.sticky.get(tp[0]):
                n = self.partition_counts[tp[0]]
                self.sticky[tp[0]] = random.randrange(n) if n > 1 else 0
        self._produce(batches)
        for tp, c in counts.items():
            self.sequences[tp] = (self.sequences[tp] + c) % (1 << 31)
            self.sent_records += c

    def _produce(self, batches: dict[TopicPartition, bytes]) -> None:
        pending = dict(batches)
        attempt = 0
        while pending:
            leaders: dict[int, dict[TopicPartition, bytes]] = defaultdict(dict)
            for tp, b in pending.items():
                leaders[self.broker.leader(*tp)][tp] = b
            failed: dict[TopicPartition, bytes] = {}
            last_error = ""
            lost = False
            for node, group in leaders.items():
                try:
                    results = self.broker.produce(node, group, acks=self.options.acks, timeout_ms=self.options.timeout_ms)
                except (OSError, KafkaClientError) as e:
                    # Connection lost: resend (the broker drops duplicates of an idempotent batch).
                    failed.update(group)
                    last_error = f"{type(e).__name__}: {e}"
                    lost = True
                    continue
                for tp, b in group.items():
                    code, _base, message = results.get(tp, (-1, -1, "no answer for this partition"))
                    if code == 0:
                        continue
                    detail = f"{error_name(code)}" + (f": {message}" if message else "")
                    if code in RETRIABLE:
                        failed[tp] = b
                        last_error = f"{tp[0]}-{tp[1]}: {detail}"
                    else:
                        raise ProducerError(f"Failed to write to {tp[0]}-{tp[1]}: {detail}")
            if not failed:
                return
            attempt += 1
            if attempt > self.options.retries:
                raise ProducerError(f"Failed to write after {attempt} attempts: {last_error}")
            time.sleep(min(0.1 * 2 ** (attempt - 1), 2.0))
            try:
                if lost:
                    self.broker.reconnect()
                else:
                    self.broker.metadata(sorted({t for t, _ in failed}))
            except (OSError, KafkaClientError, KafkaError):
                pass
            pending = failed
