"""DeleteTopics in the metadata (Kafka's RemoveTopicRecord) and the topic ids that tell a topic
created again under its name from the one deleted (library scenario `delete-topic` runs it whole)."""

from controller_quorum.metadata import (
    ConfigRecord,
    MetadataImage,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    new_topic_id,
)
from storage.partition_log import partition_metadata, read_partition_metadata


def partition(topic: str, index: int, leader: int | None) -> PartitionRecord:
    isr = (leader,) if leader is not None else ()
    return PartitionRecord(topic, index, (1, 2), isr, (), (), leader, 0, 0)


def image_with_topic(name: str, topic_id: str) -> MetadataImage:
    image = MetadataImage()
    for offset, rec in enumerate([
        TopicRecord(name, topic_id),
        ConfigRecord("topic", name, "min.insync.replicas", 2),
        partition(name, 0, 1),
        partition(name, 1, None),  # leaderless: in the image's index
    ]):
        image.apply(offset, rec)
    return image


def test_remove_topic_record_takes_the_topic_its_partitions_and_its_configs():
    image = image_with_topic("t", "id-1")
    assert (("t", 1) in image.leaderless) and image.topic_configs["t"]
    image.apply(4, RemoveTopicRecord("t", "id-1"))
    assert image.topics == {} and image.partitions == {} and image.leaderless == {}
    assert "t" not in image.topic_configs
    assert image.offset == 5


def test_a_remove_topic_record_of_an_older_topic_of_the_same_name_changes_nothing():
    image = image_with_topic("t", "id-2")
    image.apply(4, RemoveTopicRecord("t", "id-1"))
    assert image.topics == {"t": "id-2"} and set(image.partitions) == {("t", 0), ("t", 1)}


def test_topic_ids_are_kafkas_22_character_form_and_differ_for_a_topic_created_again():
    first, again = new_topic_id("t", 3), new_topic_id("t", 40)
    assert len(first) == len(again) == 22 and first != again
    assert new_topic_id("t", 3) == first  # a pure function: a replay makes the same ids
    assert new_topic_id("u", 3) != first


def test_partition_metadata_names_the_topic_id_and_its_absence_names_none():
    assert read_partition_metadata(partition_metadata("abc")) == "abc"
    assert partition_metadata("abc") == b"version: 0\ntopic_id: abc\n"  # Kafka's file
    assert read_partition_metadata(None) is None
    assert read_partition_metadata(b"") is None
