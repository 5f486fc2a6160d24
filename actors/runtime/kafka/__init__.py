"""Kafka's wire protocol on kraftlab's brokers: real Kafka clients (librdkafka and its bindings,
kcat, kafka-python) produce to and consume from an emulated cluster.

- `apis`: the APIs and versions a listener serves (its ApiVersions answer), and Kafka's error codes
  for kraftlab's outcomes;
- `batches`: Kafka's RecordBatch v2 (CRC-32C checked) to and from a kraftlab batch;
- `gateway`: one client connection's requests turned into the broker role's messages, and the
  role's answers into Kafka's responses (no I/O);
- `listener`: the TCP server in a broker's process (asyncio);
- real clients as a scenario's load (`load.client: librdkafka`): `load_identity` (how a load
  client names itself and its records), `load_producer` and `load_consumer` (confluent-kafka
  clients as client roles), `load_join` (their rows completed with the listeners').

Protocol types come from kafka-python's `kafka.protocol` (generated from Kafka's JSON message
schemas) and its record module: docs/how-to/real-clients.md says why that library.
"""
