"""``kafka-tiers quickstart``: the main job, on embedded defaults (no server, no account)."""

from __future__ import annotations

from importlib import resources

import click

from kafka_tiers.cli.output import console, emit_json


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
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
def quickstart(config_path: str | None, cluster_path: str | None, topic: str,
               partitions: int, replication_factor: int, fmt: str) -> None:
    """Run the core on embedded defaults and show what kafka-tiers does.

    Starts the broker core with the sample configuration, loads the configured replica placer
    through its entry point (broker.replica.placer=multi-level-rack), and places a topic on a
    sample cluster of three data centres with two racks each (one broker fenced), then shows
    where every replica and leader went, per broker, per data centre and per rack.

    \b
    Examples:
      kafka-tiers quickstart
      kafka-tiers quickstart --partitions 24 --format json
    """
    from kafka_tiers.cli.place import show_placement
    from kafka_tiers.cluster_file import load_cluster, reassignment_json
    from kafka_tiers.config import BrokerConfig
    from kafka_tiers.core import BrokerCore
    from kafka_tiers.log.names import validate_topic
    from kafka_tiers.placement.quality import placement_quality
    from kafka_tiers.plugins import PLACER_GROUP, resolve_class

    validate_topic(topic)
    config_file = config_path or _sample("server.properties")
    cluster_file = cluster_path or _sample("multi-level-cluster.json")
    cfg = BrokerConfig.from_file(config_file)
    cluster = load_cluster(cluster_file)
    _, label = resolve_class(PLACER_GROUP, cfg["broker.replica.placer"])
    with BrokerCore(cfg) as core:
        plan = core.plan_topic(cluster, topic, partitions, replication_factor)
        core.topic_created(topic, plan)
    if fmt == "json":
        quality = placement_quality(list(plan.values()), cluster)
        emit_json({"version": 1, "config": config_file, "cluster": cluster_file,
                   "placer": cfg["broker.replica.placer"],
                   "placement": reassignment_json(plan),
                   "quality": quality.to_dict()})
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
    out.print("Next: `kafka-tiers place --cluster your-cluster.json --partitions N "
              "--replication-factor R --format json` writes Kafka's reassignment JSON; "
              "`kafka-tiers plugins list` shows every installed plugin.")


__all__ = ["quickstart"]
