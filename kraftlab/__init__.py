"""kraftlab: a laboratory for the Apache Kafka replication protocol in KRaft mode."""
