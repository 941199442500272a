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

Broker-wide figures of the remote log manager's quotas (KIP-956), gauges without labels, read
when scraped (Kafka's group and name; Prometheus: the group and name in lower case, ``-`` and
``:`` as ``_``, under ``kafka_log_remote_``):

=============================================== ==============================================
Kafka name                                      meaning
=============================================== ==============================================
RemoteLogManager:remote-copy-throttle-time-avg  ms a segment copy waited for the copy quota
                                                (average over the quota's windows)
RemoteLogManager:remote-copy-throttle-time-max  the longest such wait in the windows
RemoteLogManager:remote-fetch-throttle-time-avg ms a skipped remote read would have waited for
                                                the fetch quota (average)
RemoteLogManager:remote-fetch-throttle-time-max the longest such time in the windows
RLMCopy:byte-rate                               bytes per second copied, as the quota
                                                measures it
RLMFetch:byte-rate                              bytes per second read from the remote tier,
                                                as the quota measures it
=============================================== ==============================================
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

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


#: broker-wide quota figure (Kafka "group:name") -> help text.
QUOTA_GAUGES: dict[str, str] = {
    "RemoteLogManager:remote-copy-throttle-time-avg":
        "Average ms a segment copy waited for the copy quota.",
    "RemoteLogManager:remote-copy-throttle-time-max":
        "Longest ms a segment copy waited for the copy quota.",
    "RemoteLogManager:remote-fetch-throttle-time-avg":
        "Average throttle ms of remote reads skipped by the fetch quota.",
    "RemoteLogManager:remote-fetch-throttle-time-max":
        "Longest throttle ms of remote reads skipped by the fetch quota.",
    "RLMCopy:byte-rate": "Bytes per second copied to the remote tier (the copy quota's rate).",
    "RLMFetch:byte-rate": "Bytes per second read from the remote tier (the fetch quota's rate).",
}

QUOTA_PREFIX = "kafka_log_remote_"


def quota_prometheus_name(kafka_name: str) -> str:
    """The Prometheus family name of a quota figure (:data:`QUOTA_GAUGES`).

    Raises:
        KeyError: not a quota figure.
    """
    if kafka_name not in QUOTA_GAUGES:
        raise KeyError(kafka_name)
    return QUOTA_PREFIX + kafka_name.lower().replace("-", "_").replace(":", "_")


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
        self._readers: dict[str, Callable[[], float]] = {}
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

    def set_reader(self, name: str, read: Callable[[], float]) -> None:
        """Make the broker-wide quota figure ``name`` (:data:`QUOTA_GAUGES`) read by
        ``read()`` whenever it is asked for (the latest caller wins).

        Raises:
            KeyError: not a quota figure.
        """
        if name not in QUOTA_GAUGES:
            raise KeyError(name)
        with self._lock:
            self._readers[name] = read

    # -- reading -----------------------------------------------------------------------------

    def value(self, name: str, tp: TopicPartition | None = None) -> float:
        """The value of a metric for ``tp``, or broker-wide (the sum) when ``tp`` is None.

        Raises:
            KeyError: an unknown metric.
        """
        if name in QUOTA_GAUGES:
            with self._lock:
                read = self._readers.get(name)
            return float(read()) if read is not None else 0.0
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
        for name, doc in QUOTA_GAUGES.items():
            family = quota_prometheus_name(name)
            metric = Metric(family, f"{doc} (Kafka: {name})", "gauge")
            metric.add_sample(family, {}, self.value(name))
            yield metric

    def text(self) -> str:
        """Everything in the Prometheus text exposition format."""
        return generate_latest(self.registry).decode("utf-8")


__all__ = ["GAUGES", "METERS", "PREFIX", "QUOTA_GAUGES", "QUOTA_PREFIX", "RemoteStorageMetrics",
           "prometheus_name", "quota_prometheus_name"]
