"""What a console consumer says on stderr while nothing arrives, as Kafka's tools warn: the broker went away
(rate-limited, librdkafka retries every few hundred ms), or the topic only exists because this consumer asked
for it (a misspelt name auto-created by the broker) and so has nothing to read."""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable

from confluent_kafka import KafkaError

from kbus.cli.common import warn

# librdkafka's local errors for a broker that cannot be reached
_CONNECTION_ERRORS = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
REPEAT_S = 10.0
AUTO_CREATED_GRACE_S = 5.0


class ConsumerWatch:
    def __init__(self, bootstrap: str, clock: Callable[[], float] = time.monotonic,
                 say: Callable[[str], None] = warn) -> None:  # fmt: skip
        self.bootstrap = bootstrap
        self._clock = clock
        self._say = say
        self._started = clock()
        self._down_since_report = 0
        self._last_down_report: float | None = None
        self._auto_created: list[str] = []
        self._existing: list[str] = []
        self._auto_created_reported = False
        self._received = False

    # ---- the broker
    def on_error(self, err: KafkaError) -> None:
        """librdkafka's error_cb (runs inside poll/consume, on the consuming thread)."""
        if err.code() not in _CONNECTION_ERRORS:
            return
        now = self._clock()
        self._down_since_report += 1
        if self._last_down_report is not None and now - self._last_down_report < REPEAT_S:
            return
        again = "" if self._last_down_report is None else " (still)"
        self._say(
            f"WARN Connection to {self.bootstrap} could not be established{again}. Broker may not be available. "
            f"({err.str()})"
        )
        self._last_down_report = now
        self._down_since_report = 0

    # ---- the topic
    def topic_auto_created(self, topic: str, existing: list[str]) -> None:
        self._auto_created.append(topic)
        self._existing = existing

    def received(self) -> None:
        self._received = True
        self._last_down_report = None  # data flows: the next outage is reported at once

    def tick(self) -> None:
        """Called between polls: warn once when an auto-created topic stays empty for a few seconds."""
        if self._received or self._auto_created_reported or not self._auto_created:
            return
        if self._clock() - self._started < AUTO_CREATED_GRACE_S:
            return
        self._auto_created_reported = True
        for topic in self._auto_created:
            close = difflib.get_close_matches(topic, self._existing, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            self._say(
                f"WARN Topic '{topic}' did not exist: the broker created it when this consumer asked for it "
                f"(auto.create.topics.enable), so it has no records yet.{hint}"
            )
