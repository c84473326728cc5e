"""Kafka 4's group configs (GroupConfig: `kafka-configs --entity-type groups`), the ones kbus applies: the share
group keys of KIP-932. Each overrides, for one group, the broker's `group.share.*` value; unset, the broker's
applies. Validation as Kafka's (types, `share.auto.offset.reset` values); kbus keeps them in ZooKeeper under
/config/groups/<group> (Kafka 4 keeps them in its KRaft metadata)."""

from __future__ import annotations

from collections.abc import Mapping

from kbus.common.errors import InvalidConfigError

# name -> (Kafka's ConfigDef type, the broker key whose value is the default)
GROUP_CONFIGS: dict[str, tuple[str, str | None]] = {
    "share.auto.offset.reset": ("STRING", None),
    "share.record.lock.duration.ms": ("INT", "group.share.record.lock.duration.ms"),
    "share.delivery.count.limit": ("INT", "group.share.delivery.count.limit"),
    "share.partition.max.record.locks": ("INT", "group.share.partition.max.record.locks"),
    "share.session.timeout.ms": ("INT", "group.share.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("INT", "group.share.heartbeat.interval.ms"),
    "share.isolation.level": ("STRING", None),
}
DEFAULTS = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted"}
AUTO_OFFSET_RESET = ("latest", "earliest")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def validate_group_configs(changes: Mapping[str, str | None]) -> None:
    """Raises InvalidConfigError as Kafka's GroupConfig.validate would (None: the key is being removed)."""
    for name, value in changes.items():
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        if value is None:
            continue
        kind, _ = GROUP_CONFIGS[name]
        if kind == "INT":
            try:
                number = int(value.strip())
            except ValueError:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type "
                                         "INT") from None
            if number < 1:
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Value must be at least 1")
        elif name == "share.auto.offset.reset" and value not in AUTO_OFFSET_RESET:
            # Kafka also takes by_duration:<ISO-8601>; kbus does not
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: String must be one of: "
                                     "latest, earliest")
        elif name == "share.isolation.level" and value not in ISOLATION_LEVELS:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: String must be one of: "
                                     "read_committed, read_uncommitted")
