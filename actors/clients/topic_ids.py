"""What a client knows of topic ids (KIP-516): each topic's id as the metadata last named it.

A topic whose id changes was deleted and created again under its name: what a client knew of its
partitions (leaders and their epochs, a producer's idempotent sequences) belonged to the old topic,
whose leader epochs the new one starts below. An id once replaced is never taken back from a broker
whose metadata is behind.
"""

from __future__ import annotations

from actors.replication.messages import MetadataResponse


class TopicIds:
    def __init__(self) -> None:
        self.current: dict[str, str] = {}
        self.retired: set[str] = set()

    def get(self, topic: str) -> str | None:
        return self.current.get(topic)

    def learn(self, resp: MetadataResponse) -> list[str]:
        """Take the ids a metadata answer names; returns the topics created again since last known."""
        recreated = []
        for pm in resp.partitions:
            known = self.current.get(pm.topic)
            if pm.topic_id is None or pm.topic_id == known or pm.topic_id in self.retired:
                continue
            if known is not None:
                self.retired.add(known)
                recreated.append(pm.topic)
            self.current[pm.topic] = pm.topic_id
        return recreated
