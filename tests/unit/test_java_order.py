"""java.util.HashMap iteration order (values worked out from Java's hashCode and HashMap.hash)."""

from kbus.admin.java_order import hashmap_order, string_hash, topic_partition_hash


def test_string_and_topic_partition_hash_codes() -> None:
    assert string_hash("") == 0
    assert string_hash("version") == 351608024
    assert string_hash("brokers") == 150569914
    assert topic_partition_hash("t", 0) == 31 * 31 + ord("t")


def test_kafka_log_dirs_json_key_order() -> None:
    # what kafka-log-dirs.sh prints: {"brokers":..,"version":1} and {"partitions":..,"error":..,"logDir":..}
    assert hashmap_order(["version", "brokers"], string_hash) == ["brokers", "version"]
    assert hashmap_order(["logDir", "error", "partitions"], string_hash) == ["partitions", "error", "logDir"]
    assert hashmap_order(["partition", "size", "offsetLag", "isFuture"], string_hash) == [
        "partition", "size", "offsetLag", "isFuture"]


def test_small_integer_keys_iterate_ascending_and_capacity_matters() -> None:
    assert hashmap_order([3, 1, 2, 0], int) == [0, 1, 2, 3]
    # 5 and 1 share a bucket in a 4-slot table (new HashMap<>(3)) but not in a 16-slot one
    assert hashmap_order([5, 1, 2], int, initial_capacity=3) == [5, 1, 2]
    assert hashmap_order([5, 1, 2], int) == [1, 2, 5]
