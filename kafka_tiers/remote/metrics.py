"""Tiered storage metrics under Kafka's names, kept with prometheus-client.

Each broker has its own :class:`prometheus_client.CollectorRegistry` (so two brokers in one
process never mix their figures) holding one :class:`RemoteStorageMetrics` collector.

Kafka's meters (``kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec`` ...) are
exported as Prometheus counters (``rate()`` gives the per-second figure), Kafka's gauges as
gauges. The Prometheus name is ``kafka_server_brokertopicmetrics_`` + the Kafka name in lower
case (+ ``_total`` for counters), as the JMX exporter writes it. Each family holds one sample
per partition (labels ``topic`` and ``partition``) and one broker-wide sample without labels
(Kafka's metric without the topic tag), so filter on ``topic!=""`` before summing.

=============================== =========== ==================================================
Kafka name                      kind        meaning
=============================== =========== ==================================================
RemoteCopyBytesPerSec           counter     bytes of segments copied to the remote tier
RemoteCopyRequestsPerSec        counter     segment copies attempted
RemoteCopyErrorsPerSec          counter     segment copies failed
RemoteFetchBytesPerSec          counter     bytes read from the remote tier by fetches
RemoteFetchRequestsPerSec       counter     remote reads attempted
RemoteFetchErrorsPerSec         counter     remote reads failed (timeouts included)
RemoteDeleteRequestsPerSec      counter     remote segments deleted (retention, topic deletion)
RemoteDeleteErrorsPerSec        counter     remote deletions failed
RemoteCopyLagBytes              gauge       bytes of rolled segments below the high watermark
                                            not yet in the remote tier
RemoteCopyLagSegments           gauge       how many such segments
RemoteLogSizeBytes              gauge       bytes held in the remote tier
=============================== =========== ==================================================
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from kafka_tiers.api.cluster import TopicPartition

PREFIX = "kafka_server_brokertopicmetrics_"

#: Kafka meter name -> help text (exported as counters).
METERS: dict[str, str] = {
    "RemoteCopyBytesPerSec": "Bytes of segments copied to the remote tier.",
    "RemoteCopyRequestsPerSec": "Segment copies to the remote tier attempted.",
    "RemoteCopyErrorsPerSec": "Segment copies to the remote tier that failed.",
    "RemoteFetchBytesPerSec": "Bytes read from the remote tier by fetches.",
    "RemoteFetchRequestsPerSec": "Reads from the remote tier attempted.",
    "RemoteFetchErrorsPerSec": "Reads from the remote tier that failed (timeouts included).",
    "RemoteDeleteRequestsPerSec": "Remote segments deleted.",
    "RemoteDeleteErrorsPerSec": "Remote segment deletions that failed.",
}

#: Kafka gauge name -> help text.
GAUGES: dict[str, str] = {
    "RemoteCopyLagBytes": "Bytes of rolled segments below the high watermark not yet copied.",
    "RemoteCopyLagSegments": "Rolled segments below the high watermark not yet copied.",
    "RemoteLogSizeBytes": "Bytes of the partition held in the remote tier.",
}


def prometheus_name(kafka_name: str) -> str:
    """The Prometheus family name of a Kafka metric name (without ``_total``).

    Raises:
        KeyError: not a tiered storage metric.
    """
    if kafka_name not in METERS and kafka_name not in GAUGES:
        raise KeyError(kafka_name)
    return PREFIX + kafka_name.lower()


class RemoteStorageMetrics(Collector):
    """The tiered storage metrics of one broker (thread-safe).

    Args:
        registry: where to register (a new dedicated registry by default).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(
            auto_describe=True)
        self._lock = threading.Lock()
        self._meters: dict[str, dict[TopicPartition, float]] = {n: {} for n in METERS}
        self._gauges: dict[str, dict[TopicPartition, float]] = {n: {} for n in GAUGES}
        self.registry.register(self)

    # -- recording ---------------------------------------------------------------------------

    def mark(self, name: str, tp: TopicPartition, amount: float = 1) -> None:
        """Add ``amount`` to meter ``name`` of ``tp`` (and so to the broker-wide total).

        Raises:
            KeyError: an unknown meter.
        """
        with self._lock:
            series = self._meters[name]
            series[tp] = series.get(tp, 0) + amount

    def set_gauge(self, name: str, tp: TopicPartition, value: float) -> None:
        """Set gauge ``name`` of ``tp``.

        Raises:
            KeyError: an unknown gauge.
        """
        with self._lock:
            self._gauges[name][tp] = value

    def remove_partition(self, tp: TopicPartition) -> None:
        """Forget the gauges of a partition no longer managed here (its meters keep counting
        in the broker-wide totals)."""
        with self._lock:
            for series in self._gauges.values():
                series.pop(tp, None)

    # -- reading -----------------------------------------------------------------------------

    def value(self, name: str, tp: TopicPartition | None = None) -> float:
        """The value of a metric for ``tp``, or broker-wide (the sum) when ``tp`` is None.

        Raises:
            KeyError: an unknown metric.
        """
        with self._lock:
            series = self._meters[name] if name in self._meters else self._gauges[name]
            if tp is None:
                return float(sum(series.values()))
            return float(series.get(tp, 0))

    def collect(self) -> Iterator[Metric]:
        """The metric families (prometheus-client's collector protocol)."""
        with self._lock:
            meters = {n: dict(s) for n, s in self._meters.items()}
            gauges = {n: dict(s) for n, s in self._gauges.items()}
        for kind, families in (("counter", meters), ("gauge", gauges)):
            for name, series in families.items():
                doc = METERS.get(name) or GAUGES[name]
                family = prometheus_name(name)
                metric = Metric(family, f"{doc} (Kafka: {name})", kind)
                sample = family + ("_total" if kind == "counter" else "")
                metric.add_sample(sample, {}, float(sum(series.values())))
                for tp in sorted(series):
                    metric.add_sample(sample, {"topic": tp.topic,
                                               "partition": str(tp.partition)},
                                      float(series[tp]))
                yield metric

    def text(self) -> str:
        """Everything in the Prometheus text exposition format."""
        return generate_latest(self.registry).decode("utf-8")


__all__ = ["GAUGES", "METERS", "PREFIX", "RemoteStorageMetrics", "prometheus_name"]
