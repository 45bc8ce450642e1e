"""Which topics a Kafka source reads: one (TOPIC), a list (TOPICS) or every topic whose whole name
matches a regular expression (TOPIC PATTERN), as the data source's options carry it.

The options are Spark's Kafka source's own names: ``subscribe`` (a comma-separated list, which
cannot be ambiguous: a Kafka topic name holds only ``a-z A-Z 0-9 . _ -``), ``subscribePattern``,
and ``kafka.metadata.max.age.ms``, how old the list of topics may get before the planner lists
them again (Spark's consumer finds new topics of a pattern when its metadata is refreshed; this
one does when the list is). A source of one topic keeps icesql's ``topic`` option: its offsets stay
in the form its checkpoints have always had (``offsets``).

A pattern is matched with Python's ``re.fullmatch`` (Kafka's consumer: ``matcher().matches()``;
the analyzer refuses patterns Java and Python read differently, ``analyzer.topics``), and never
matches a topic whose name begins with ``__`` - Kafka's internal topics (``__consumer_offsets``,
``__transaction_state``), which Kafka's consumers leave out of pattern subscriptions too. TOPICS
may name one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from icesql.plan_objects import describe_topics

DEFAULT_REFRESH = 30.0  # seconds (Spark's and Materialize's pattern sources refresh about this often)
REFRESH_OPTION = "kafka.metadata.max.age.ms"


@dataclass(frozen=True)
class Subscription:
    topic: str | None = None  # TOPIC: the one topic (None: many)
    topics: tuple[str, ...] = ()  # TOPICS
    pattern: str | None = None  # TOPIC PATTERN
    refresh: float = DEFAULT_REFRESH  # seconds between two listings of the topics (many only)

    @classmethod
    def of(cls, spec: Any) -> Subscription:
        """The subscription of a ``plan.KafkaSourceSpec``."""
        refresh = spec.topic_refresh if spec.topic_refresh is not None else DEFAULT_REFRESH
        if spec.topic_pattern is not None:
            return cls(pattern=spec.topic_pattern, refresh=refresh)
        if spec.topics:
            return cls(topics=tuple(spec.topics), refresh=refresh)
        return cls(topic=spec.topic)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Subscription:
        # Spark hands a data source its options with their names in lower case
        found = {k.lower(): v for k, v in options.items()}
        refresh = DEFAULT_REFRESH
        if found.get(REFRESH_OPTION):
            refresh = int(found[REFRESH_OPTION]) / 1000.0
        if found.get("subscribepattern") is not None:
            return cls(pattern=found["subscribepattern"], refresh=refresh)
        if found.get("subscribe"):
            return cls(topics=tuple(t for t in found["subscribe"].split(",") if t), refresh=refresh)
        return cls(topic=found["topic"])

    def options(self) -> dict[str, str]:
        """The data source's options that carry it (``from_options`` reads them back)."""
        if self.topic is not None:
            return {"topic": self.topic}
        found = {REFRESH_OPTION: str(max(1, round(self.refresh * 1000)))}
        if self.pattern is not None:
            return {**found, "subscribePattern": self.pattern}
        return {**found, "subscribe": ",".join(self.topics)}

    @property
    def single(self) -> str | None:
        """The topic of a TOPIC source (offsets in the one-topic form), None for many topics."""
        return self.topic

    @cached_property
    def _regex(self) -> re.Pattern[str] | None:
        return re.compile(self.pattern) if self.pattern is not None else None

    def reads(self, topic: str) -> bool:
        """Whether ``topic`` is one of the source's."""
        if self.topic is not None:
            return topic == self.topic
        if self._regex is not None:
            return not topic.startswith("__") and self._regex.fullmatch(topic) is not None
        return topic in self.topics

    def describe(self) -> str:
        return describe_topics(self.topic, self.topics, self.pattern)


__all__ = ["DEFAULT_REFRESH", "REFRESH_OPTION", "Subscription"]
