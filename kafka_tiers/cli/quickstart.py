"""``kafka-tiers quickstart``: the main job, on embedded defaults (no server, no account)."""

from __future__ import annotations

import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import click

from kafka_tiers.cli.output import console, emit_json

#: where the quick start keeps its broker's files (like Kafka's quick start's /tmp/kafka-logs).
DEFAULT_DIR = str(Path(tempfile.gettempdir()) / "kafka-tiers-quickstart")

#: marks a directory as the quick start's own, so a later run may empty it.
MARKER = ".kafka-tiers-quickstart"


def _sample(name: str) -> str:
    return str(resources.files("kafka_tiers") / "samples" / name)


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="server.properties (default: the embedded sample).")
@click.option("--cluster", "cluster_path", type=click.Path(dir_okay=False),
              help="cluster.json (default: the embedded 3-DC x 2-rack sample).")
@click.option("--topic", default="orders", show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=12, show_default=True)
@click.option("--replication-factor", type=int, default=3, show_default=True)
@click.option("--records", type=click.IntRange(min=10, max=100_000), default=1000,
              show_default=True, help="Records produced in the tiering part.")
@click.option("--dir", "work_dir", type=click.Path(file_okay=False), default=DEFAULT_DIR,
              show_default=True, help="Where the quick-start broker keeps its two log dirs, "
              "its remote tier and its server.properties (emptied first; only a directory "
              "an earlier quick start made, or an empty one, is accepted).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def quickstart(config_path: str | None, cluster_path: str | None, topic: str,
               partitions: int, replication_factor: int, records: int, work_dir: str,
               fmt: str) -> None:
    """Run the core on embedded defaults and show what kafka-tiers does.

    Starts the broker core with the sample configuration, loads the configured replica placer
    through its entry point (broker.replica.placer=multi-level-rack), and places a topic on a
    sample cluster of three data centres with two racks each (one broker fenced), then shows
    where every replica and leader went, per broker, per data centre and per rack.

    Then it shows tiered storage: a broker with two log dirs (two "disks") and a `local`
    remote tier under --dir produces records into a tiered topic with small segments, the
    remote log manager copies the rolled segments, local retention removes them from the local
    disk, and a read from offset 0 comes back from the remote tier. A real Kafka client
    (confluent-kafka when installed, else kafka-python) then produces to the broker's Kafka
    listener (PLAINTEXT on 127.0.0.1 only, a free port: no TLS, SASL or ACLs, see
    docs/security.md) and consumes the partition from offset 0, the old offsets served from
    the remote tier, every record checked. The broker is shut down
    cleanly and its files stay, so the commands printed at the end (log-dirs describe,
    reassign, remote ls, dump-log) work on them.

    Last, a 3-broker cluster (one broker per data centre, embedded metadata store) creates a
    topic through the same placer, takes records with acks=all, loses the leader of a
    partition, elects a new one, and shows that every acknowledged record is still there.

    \b
    Examples:
      kafka-tiers quickstart
      kafka-tiers quickstart --partitions 24 --format json
    """
    from kafka_tiers.cli.place import show_placement
    from kafka_tiers.config import BrokerConfig
    from kafka_tiers.log.names import validate_topic
    from kafka_tiers.placement.cluster_file import load_cluster, reassignment_json
    from kafka_tiers.placement.quality import placement_quality
    from kafka_tiers.placement.service import PlacementService
    from kafka_tiers.plugins import PLACER_GROUP, resolve_class

    validate_topic(topic)
    config_file = config_path or _sample("server.properties")
    cluster_file = cluster_path or _sample("multi-level-cluster.json")
    cfg = BrokerConfig.from_file(config_file)
    cluster = load_cluster(cluster_file)
    _, label = resolve_class(PLACER_GROUP, cfg["broker.replica.placer"])
    with PlacementService(cfg) as core:
        plan = core.plan_topic(cluster, topic, partitions, replication_factor)
        core.topic_created(topic, plan)
        tiering = tiering_demo(cfg, topic, records, core.hooks, Path(work_dir))
    cluster_doc = cluster_demo(cfg, Path(work_dir).resolve())
    if fmt == "json":
        quality = placement_quality(list(plan.values()), cluster)
        emit_json({"version": 1, "config": config_file, "cluster_file": cluster_file,
                   "placer": cfg["broker.replica.placer"],
                   "placement": reassignment_json(plan),
                   "quality": quality.to_dict(),
                   "tiering": tiering, "cluster": cluster_doc})
        return
    out = console()
    out.rule("kafka-tiers quick start")
    out.print(f"config   {config_file}")
    out.print(f"cluster  {cluster_file}: {len(cluster)} brokers in {len(cluster.racks)} racks, "
              f"{len(cluster) - len(cluster.usable_brokers)} fenced")
    out.print(f"placer   {label} (broker.replica.placer)")
    out.print()
    show_placement(plan, cluster, None, cfg["broker.replica.placer"])
    out.print()
    show_tiering(tiering)
    out.print()
    show_cluster(cluster_doc)
    out.print()
    out.print("Next, on the quick-start broker's files:")
    for command in next_commands(tiering):
        out.print(f"  {command}", soft_wrap=True)


def next_commands(doc: dict[str, Any]) -> list[str]:
    """The follow-up commands that work on the files the quick start left."""
    props, topic = doc["server_properties"], doc["topic"]
    return [
        f"kafka-tiers log-dirs describe --config {props}",
        f"kafka-tiers log-dirs plan --config {props}",
        f"kafka-tiers remote ls --config {props} --topic {topic} --partition 0",
        f"kafka-tiers dump-log {doc['active_segment']} --print-data",
        "kafka-tiers cluster start --brokers 3 --racks /dc1/r1,/dc2/r1,/dc3/r1",
        "kafka-tiers place --cluster your-cluster.json --partitions N --replication-factor R "
        "--format json",
        "kafka-tiers plugins list",
    ]


#: the tiering part's topic settings: small segments, nothing kept locally once copied.
DEMO_TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "16384",
                     "local.retention.bytes": "0"}



def prepare_dir(work: Path) -> None:
    """Empty ``work`` for a new run: only when it is missing, empty, or marked as an earlier
    quick start's (never anyone else's files).

    Raises:
        ConfigError: ``work`` holds files the quick start did not make.
    """
    from kafka_tiers.api import ConfigError

    if work.exists():
        if not work.is_dir():
            raise ConfigError(f"--dir {work} is not a directory")
        if any(work.iterdir()) and not (work / MARKER).exists():
            raise ConfigError(f"--dir {work} is not empty and was not made by the quick start; "
                              "give an empty or new directory")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / MARKER).write_text("made by kafka-tiers quickstart; emptied by its next run\n")


def tiering_demo(cfg: Any, topic: str, records: int, hooks: Any, work: Path
                 ) -> dict[str, Any]:
    """Produce ``records`` records into a tiered topic of a broker with two log dirs under
    ``work``, tier them, read everything back from offset 0; returns the figures (the
    ``tiering`` JSON section). The broker's files and its server.properties stay in ``work``.
    """
    import time

    from kafka_tiers.api import TopicPartition
    from kafka_tiers.broker import Broker

    started = time.perf_counter()
    prepare_dir(work)
    work = work.resolve()
    settings = {
        "log.dirs": f"{work / 'disk1'},{work / 'disk2'}", "remote.log.storage.enable": "true",
        "rsm.config.dir": str(work / "remote"),
        "remote.log.manager.task.interval.ms": "3600000",
        # the sample's listener (127.0.0.1:9092) may be taken: the quick start's is any free port
        "listeners": "PLAINTEXT://127.0.0.1:0",
        # librdkafka looks up its group's coordinator even for an assigned consumer, which
        # creates Kafka's internal offsets topic: one partition is enough here
        "offsets.topic.num.partitions": "1"}
    broker_cfg = cfg.with_overrides(settings)
    props = work / "server.properties"
    props.write_text("# Written by kafka-tiers quickstart: the quick-start broker's settings.\n"
                     + "".join(f"{k}={_raw(v)}\n"
                               for k, v in sorted(broker_cfg.originals.items())))
    storage = broker_cfg["remote.storage.manager.class"]
    with Broker(broker_cfg, hooks=hooks, background=False) as broker:
        broker.create_topic(topic, 2, DEMO_TOPIC_CONFIG)
        broker.produce(TopicPartition(topic, 1), [(b"key", b"on the other disk")])
        tp = TopicPartition(topic, 0)
        values = [f"{topic} event {i:06d}: " .encode() + b"x" * 80 for i in range(records)]
        broker.produce(tp, [(f"key-{i}".encode(), v) for i, v in enumerate(values)],
                       batch_records=20)
        result = broker.run_tiering([topic])[tp]
        if result.error is not None:
            raise result.error
        rows = broker.segments(tp)
        lg = broker.log(tp)
        read = {"local": 0, "remote": 0}
        offset, matches = 0, True
        while offset < records:
            fetched = broker.fetch(tp, offset, 64 * 1024)
            got = fetched.records_list()
            if not got:
                matches = False
                break
            for rec in got:
                matches = matches and rec.value == values[rec.offset]
                read[fetched.tier] += 1
            offset = fetched.next_offset
        active = lg.active_segment.log_path
        doc = {
            "topic": topic, "storage": storage, "records_produced": records,
            "dir": str(work), "server_properties": str(props),
            "log_dirs": [str(work / "disk1"), str(work / "disk2")],
            "remote_dir": str(work / "remote"),
            "active_segment": str(active),
            "segment_bytes": int(DEMO_TOPIC_CONFIG["segment.bytes"]),
            "segments": [{"base_offset": r.base_offset, "end_offset": r.end_offset,
                          "bytes": r.size, "local": r.local, "remote": r.remote}
                         for r in rows],
            "copied_segments": len(result.copied),
            "copied_bytes": sum(m.segment_size_in_bytes for m in result.copied),
            "local_segments_deleted": result.local_deleted,
            "log_start_offset": broker.log_start_offset(tp),
            "local_log_start_offset": lg.local_log_start_offset,
            "log_end_offset": lg.log_end_offset,
            "read_back": {"from_offset": 0, "records": read["local"] + read["remote"],
                          "from_remote": read["remote"], "from_local": read["local"],
                          "matches": matches and offset >= records},
        }
        doc["kafka_client"] = kafka_client_demo(broker.bootstrap_servers, topic, values,
                                                lg.local_log_start_offset)
    doc["seconds"] = round(time.perf_counter() - started, 3)
    return doc


#: records the quick start's Kafka client produces
CLIENT_RECORDS = 100


def kafka_client_demo(bootstrap: str, topic: str, values: list[bytes], local_start: int,
                      timeout: float = 30.0) -> dict[str, Any]:
    """A real Kafka client against the quick-start broker's listener: produce
    :data:`CLIENT_RECORDS` records to partition 0 (acks=all), then consume the partition from
    offset 0 and check every record (``values`` are the ones already there); the offsets
    below ``local_start`` are served from the remote tier. confluent-kafka (librdkafka) when
    it is installed (the ``clients`` extra), else kafka-python (a core dependency). Returns
    the ``kafka_client`` JSON section.

    Raises:
        KafkaTiersError: the client failed, or did not get every record within ``timeout``.
    """
    import time

    started = time.perf_counter()
    produced = [f"{topic} from a Kafka client {i:04d}".encode() for i in range(CLIENT_RECORDS)]
    try:
        import confluent_kafka  # noqa: F401
        client = "confluent-kafka"
    except ImportError:
        client = "kafka-python"
    run = _confluent_round_trip if client == "confluent-kafka" else _kafka_python_round_trip
    base, got = run(bootstrap, topic, produced, len(values) + len(produced), timeout)
    expected = values + produced
    matches = [v for _, v in got] == expected and [o for o, _ in got] == list(range(len(got)))
    return {"client": client, "client_version": _dist_version(client),
            "bootstrap_servers": bootstrap, "security_protocol": "PLAINTEXT",
            "produced": len(produced), "produced_offsets": [base, base + len(produced) - 1],
            "consumed": len(got), "from_offset": 0,
            "from_remote": sum(1 for o, _ in got if o < local_start),
            "matches": matches, "seconds": round(time.perf_counter() - started, 3)}


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _confluent_round_trip(bootstrap: str, topic: str, produced: list[bytes], total: int,
                          timeout: float) -> tuple[int, list[tuple[int, bytes]]]:
    """Produce with a librdkafka producer, consume partition 0 from offset 0 with a
    librdkafka consumer (assigned, no group); returns the first produced offset and the
    ``(offset, value)`` read."""
    import time

    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition as KafkaPartition

    from kafka_tiers.api.errors import KafkaTiersError

    offsets: list[int] = []
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": int(timeout * 1000), "linger.ms": 5})
    try:
        for v in produced:
            producer.produce(topic, value=v, partition=0, on_delivery=delivered)
        left = producer.flush(timeout)
    finally:
        producer.purge()
    if errors or left or len(offsets) != len(produced):
        raise KafkaTiersError(f"the confluent-kafka producer at {bootstrap} failed: "
                              f"{errors[0] if errors else f'{left} record(s) not delivered'}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-tiers-quickstart",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100})
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([KafkaPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(got) < total:
            if time.monotonic() > deadline:
                raise KafkaTiersError(f"the confluent-kafka consumer at {bootstrap} read "
                                      f"{len(got)} of {total} records in {timeout:g}s")
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error():
                    raise KafkaTiersError(f"the confluent-kafka consumer at {bootstrap}: "
                                          f"{msg.error()}")
                got.append((int(msg.offset() or 0), bytes(msg.value() or b"")))
    except KafkaException as exc:
        raise KafkaTiersError(f"the confluent-kafka consumer at {bootstrap}: {exc}") from None
    finally:
        consumer.close()
    return min(offsets), got


def _kafka_python_round_trip(bootstrap: str, topic: str, produced: list[bytes], total: int,
                             timeout: float) -> tuple[int, list[tuple[int, bytes]]]:
    """The same with kafka-python's producer and consumer."""
    from kafka_tiers.cli.kafka_admin import KafkaAdmin

    with KafkaAdmin(bootstrap.split(","), timeout=timeout) as admin:
        base = admin.produce(topic, 0, produced, acks=-1)
        got = admin.fetch_all(topic, 0, 0)
    return base, [(o, v or b"") for o, _k, v in got]


#: the cluster part's racks: one broker per data centre.
DEMO_RACKS = ("/dc1/rack1", "/dc2/rack1", "/dc3/rack1")


def cluster_demo(cfg: Any, work: Path, records: int = 100) -> dict[str, Any]:
    """Start a 3-broker cluster in this process (embedded metadata store) under
    ``work/cluster``, create a topic through the configured placer, produce with acks=all,
    kill the leader of partition 0, and check every acknowledged record after failover;
    returns the figures (the ``cluster`` JSON section)."""
    import time

    from kafka_tiers.cluster.local_cluster import LocalCluster

    started = time.perf_counter()
    placer_keys = {k: v for k, v in cfg.originals.items()
                   if k == "broker.replica.placer" or k.startswith("placer.")}
    topic = "payments"
    cluster = LocalCluster(work / "cluster", 3, racks=DEMO_RACKS, overrides=placer_keys)
    cluster.start()
    try:
        client = cluster.client()
        assignment = client.create_topic(topic, 3, 3)
        acked = 0
        for p in range(3):
            for i in range(records):
                client.produce(topic, p, [(f"key-{i}".encode(), f"payment {p}-{i}".encode())])
                acked += 1
        before = client.describe_topic(topic)
        victim = next(x["leader"] for x in before if x["partition"] == 0)
        kill_at = time.perf_counter()
        cluster.kill(victim)
        cluster.wait_until(lambda: client.leader(topic, 0, refresh=True) not in (victim, -1),
                           30, "no new leader after the failover")
        failover_s = time.perf_counter() - kill_at
        after = client.describe_topic(topic)
        present = sum(len(client.read_all(topic, p)) for p in range(3))
    finally:
        cluster.close()
    return {"brokers": 3, "racks": list(DEMO_RACKS), "topic": topic,
            "placer": placer_keys.get("broker.replica.placer", "rack-aware"),
            "assignment": {str(p): r for p, r in sorted(assignment.items())},
            "acknowledged": acked, "killed_broker": victim,
            "failover_seconds": round(failover_s, 3),
            "before": [_partition_row(x) for x in before],
            "after": [_partition_row(x) for x in after],
            "present_after_failover": present,
            "seconds": round(time.perf_counter() - started, 3)}


def _partition_row(x: dict[str, Any]) -> dict[str, Any]:
    return {"partition": x["partition"], "replicas": list(x["replicas"]),
            "leader": x["leader"], "leader_epoch": x["leader_epoch"], "isr": list(x["isr"])}


def show_cluster(doc: dict[str, Any]) -> None:
    """Print the cluster part: leaders and ISR before and after the failover."""
    from rich.table import Table

    out = console()
    out.print(f"cluster: {doc['brokers']} brokers in {', '.join(doc['racks'])} (embedded "
              f"metadata store); topic {doc['topic']} placed by {doc['placer']!r}; "
              f"{doc['acknowledged']} records produced with acks=all")
    table = Table(title=f"failover: broker {doc['killed_broker']} killed")
    for column in ("partition", "replicas", "leader before", "leader after", "epoch after",
                   "isr after"):
        table.add_column(column, justify="right")
    for b, a in zip(doc["before"], doc["after"], strict=True):
        table.add_row(str(b["partition"]), ",".join(map(str, b["replicas"])),
                      str(b["leader"]), str(a["leader"]), str(a["leader_epoch"]),
                      ",".join(map(str, a["isr"])))
    out.print(table)
    ok = doc["present_after_failover"] == doc["acknowledged"]
    out.print(f"new leader in {doc['failover_seconds']} s; {doc['present_after_failover']} of "
              f"{doc['acknowledged']} acknowledged records present after the failover: "
              f"{'none lost' if ok else 'LOST RECORDS'}")


def show_tiering(doc: dict[str, Any]) -> None:
    """Print the tiering part: a table of segments and the read-back check."""
    from rich.table import Table

    out = console()
    out.print(f"tiered storage: {doc['records_produced']} records into {doc['topic']}-0 "
              f"(segment.bytes={doc['segment_bytes']}, local.retention.bytes=0) on a "
              f"{doc['storage']!r} remote tier")
    table = Table(title="segments")
    for column in ("base offset", "end offset", "bytes", "local", "remote"):
        table.add_column(column, justify="right")
    for row in doc["segments"]:
        table.add_row(str(row["base_offset"]), str(row["end_offset"]), str(row["bytes"]),
                      "yes" if row["local"] else "-", "yes" if row["remote"] else "-")
    out.print(table)
    back = doc["read_back"]
    out.print(f"copied {doc['copied_segments']} segments ({doc['copied_bytes']} bytes), "
              f"local retention deleted {doc['local_segments_deleted']} local segments: the "
              f"local log starts at {doc['local_log_start_offset']}, the partition at "
              f"{doc['log_start_offset']}")
    status = "all match" if back["matches"] else "MISMATCH"
    out.print(f"read back from offset 0: {back['records']} records, {back['from_remote']} "
              f"from the remote tier and {back['from_local']} from the local log: {status}")
    kc = doc.get("kafka_client")
    if kc:
        first, last = kc["produced_offsets"]
        out.print(f"a Kafka client ({kc['client']} {kc['client_version'] or ''}) at the "
                  f"broker's Kafka listener {kc['bootstrap_servers']}: produced {kc['produced']} "
                  f"records (offsets {first}..{last}, acks=all), then consumed "
                  f"{kc['consumed']} records from offset 0, {kc['from_remote']} of them served "
                  f"from the remote tier: {'all match' if kc['matches'] else 'MISMATCH'}")
        out.print(f"the quick-start broker's listener is {kc['security_protocol']} on 127.0.0.1 "
                  "only (no TLS, no SASL, no ACLs); docs/security.md secures a broker")


def _raw(value: object) -> object:
    """A config value as written back to a properties file: a secret key's value revealed
    (the file is the broker's own configuration, as the user gave it)."""
    from kafka_tiers.api import Secret

    return value.reveal() if isinstance(value, Secret) else value


__all__ = ["CLIENT_RECORDS", "DEFAULT_DIR", "DEMO_RACKS", "DEMO_TOPIC_CONFIG", "MARKER",
           "cluster_demo", "kafka_client_demo", "next_commands", "prepare_dir", "quickstart",
           "show_cluster", "show_tiering", "tiering_demo"]
