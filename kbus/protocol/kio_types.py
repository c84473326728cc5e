"""kio's response field types from kbus's plain values, for handlers building typed responses.

kio types its fields with phantom types (i32, i64Timedelta, TopicName, BrokerId, ...): subclasses of int, str and
timedelta that mypy keeps apart from the plain ones, whose own constructors check the value (phantom-types' parse,
~8 us a call on this machine). The values kbus puts in a response are its own (a partition index, a broker id, a
configured time), as codec.build always passed them unchecked: these narrow with no check and no object made
(typing.cast), and kio's writer still refuses a value its wire type cannot hold (struct.error)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Final, cast

from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, TZAware, f64, i8, i16, i32, i32Timedelta, i64, i64Timedelta

__all__ = ["NO_TIME", "NO_TIME64", "broker", "brokers", "f64_", "group", "i8_", "i16_", "i32_", "i32s", "i64_", "ms32",
           "ms64", "producer", "records", "time_ms", "topic", "transactional"]


def i8_(value: int) -> i8:
    return cast(i8, value)


def i16_(value: int) -> i16:
    return cast(i16, value)


def i32_(value: int) -> i32:
    return cast(i32, value)


def i64_(value: int) -> i64:
    return cast(i64, value)


def f64_(value: float) -> f64:
    return cast(f64, value)


def broker(value: int) -> BrokerId:
    return cast(BrokerId, value)


def producer(value: int) -> ProducerId:
    return cast(ProducerId, value)


def topic(value: str) -> TopicName:
    return cast(TopicName, value)


def group(value: str) -> GroupId:
    return cast(GroupId, value)


def transactional(value: str) -> TransactionalId:
    return cast(TransactionalId, value)


def ms32(value: int) -> i32Timedelta:
    """An INT32 milliseconds field (throttle_time_ms, session timeouts)."""
    return cast(i32Timedelta, datetime.timedelta(milliseconds=value))


def ms64(value: int) -> i64Timedelta:
    return cast(i64Timedelta, datetime.timedelta(milliseconds=value))


NO_TIME: Final = ms32(0)  # a throttle_time_ms of 0: the handler's; the network layer sets a quota's
NO_TIME64: Final = ms64(0)


def brokers(values: Iterable[int]) -> tuple[BrokerId, ...]:
    """An array of broker ids (replicas, ISR)."""
    return cast(tuple[BrokerId, ...], tuple(values))


def i32s(values: Iterable[int]) -> tuple[i32, ...]:
    """An array of INT32 (partition indexes)."""
    return cast(tuple[i32, ...], tuple(values))


def time_ms(ms_since_epoch: int) -> TZAware:
    """A datetime_i64 field from milliseconds since the epoch: kio writes these from datetimes only, and Kafka's -1
    ("none", e.g. no transaction started) is the epoch less 1 ms."""
    return cast(TZAware, _EPOCH + datetime.timedelta(milliseconds=ms_since_epoch))


_EPOCH: Final = datetime.datetime.fromtimestamp(0, datetime.UTC)


def records(data: bytes) -> Records:
    """A RECORDS field (record batches as they are in the log)."""
    return cast(Records, data)
