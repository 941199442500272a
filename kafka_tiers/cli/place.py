"""``kafka-tiers place``: document 001's admin operation from the command line."""

from __future__ import annotations

from typing import Any

import click

from kafka_tiers.cli.cluster import COMMAND_CONFIG_OPTION
from kafka_tiers.cli.output import broker_ids_callback, console, emit_json


@click.command()
@click.option("--cluster", "cluster_path", type=click.Path(dir_okay=False),
              help="cluster.json: brokers (id, rack, fenced) and optional current assignments "
              "(the file `kafka-tiers cluster start` writes works too).")
@click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
              help="Instead of --cluster: a running cluster's Kafka listeners (also Apache "
              "Kafka); its brokers, racks and current assignments are read through the Kafka "
              "protocol (Metadata, DescribeCluster).")
@COMMAND_CONFIG_OPTION
@click.option("--partitions", type=click.IntRange(min=1), required=True,
              help="How many partitions to place.")
@click.option("--replication-factor", type=int, required=True, help="Replicas per partition.")
@click.option("--placer", help="Placer entry-point name or pkg.module:Class "
              "(default: broker.replica.placer from --config, else rack-aware).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="server.properties to take broker.replica.placer and placer.* keys from.")
@click.option("--broker-ids", callback=broker_ids_callback, help="Only these brokers, e.g. 1,2,3.")
@click.option("--force-simple", is_flag=True,
              help="Use the rack-unaware simple placer (Kafka's --disable-rack-aware).")
@click.option("--seed", type=int, help="placer.seed: the same seed gives the same placement.")
@click.option("--topic", default="new-topic", show_default=True,
              help="The topic's name. When cluster.json already assigns it, the new "
              "partitions continue after its last one.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="json: Kafka's reassignment document.")
@click.option("--max-rows", type=click.IntRange(min=0), default=40, show_default=True,
              help="Partition rows shown in the table (the figures cover all).")
def place(cluster_path: str | None, bootstrap: str | None, partitions: int,
          replication_factor: int, placer: str | None,
          config_path: str | None, broker_ids: list[int] | None, force_simple: bool,
          seed: int | None, topic: str, fmt: str, max_rows: int) -> None:
    """Place a topic's replicas on a cluster through a replica placer.

    Prints the placement as a table (replicas and leaders per broker, per rack and per level
    of a rack tree, and each partition's spread) or, with --format json, as Kafka's
    reassignment document, ready for `kafka-tiers reassign` or kafka-reassign-partitions.

    \b
    Examples:
      kafka-tiers place --cluster cluster.json --partitions 12 --replication-factor 3
      kafka-tiers place --cluster cluster.json --partitions 6 --replication-factor 3 \\
          --placer multi-level-rack --seed 7 --topic orders --format json > plan.json
      kafka-tiers place --bootstrap-server 127.0.0.1:9092 --topic orders --partitions 6 \\
          --replication-factor 3 --format json
    """
    from kafka_tiers.config import BrokerConfig
    from kafka_tiers.log.names import validate_topic
    from kafka_tiers.placement.cluster_file import read_cluster_file, reassignment_json
    from kafka_tiers.placement.service import PlacementService

    validate_topic(topic)
    overrides: dict[str, str] = {}
    if placer:
        overrides["broker.replica.placer"] = placer
    if seed is not None:
        overrides["placer.seed"] = str(seed)
    cfg = (BrokerConfig.from_file(config_path, overrides) if config_path
           else BrokerConfig(overrides))
    if (cluster_path is None) == (bootstrap is None):
        raise click.UsageError("give --cluster (a cluster.json) or --bootstrap-server (a "
                               "running cluster's Kafka listeners): exactly one of them")
    if bootstrap is not None:
        cluster = live_cluster_view(bootstrap)
        source = f"the cluster at {bootstrap}"
    else:
        assert cluster_path is not None
        cluster = with_running_topics(read_cluster_file(cluster_path), cluster_path)
        source = f"the cluster of {cluster_path}"
    if broker_ids is not None:
        known = {b.broker_id for b in cluster.brokers}
        unknown = [b for b in broker_ids if b not in known]
        if unknown:
            raise click.BadParameter(
                f"broker {', '.join(map(str, unknown))} {'is' if len(unknown) == 1 else 'are'} "
                f"not in {source} (brokers {sorted(known)}); give ids of "
                "its brokers", param_hint="--broker-ids")
    with PlacementService(cfg) as core:
        plan = core.plan_topic(cluster, topic, partitions, replication_factor,
                               broker_ids=broker_ids, force_simple=force_simple)
        placer_name = "simple" if force_simple else core.placer_name
    if fmt == "json":
        emit_json(reassignment_json(plan))
        return
    show_placement(plan, cluster, broker_ids, placer_name, max_rows)


def live_cluster_view(bootstrap: str) -> Any:
    """The :class:`~kafka_tiers.api.ClusterView` of a running cluster (brokers, racks,
    fenced brokers and every topic's current assignment) read through its Kafka listeners."""
    from kafka_tiers.cli.cluster import open_client, target

    with open_client(target(bootstrap, None)) as admin:
        return admin.cluster_view()


def with_running_topics(doc: Any, path: str) -> Any:
    """The cluster to place on: ``doc``'s (a
    :class:`~kafka_tiers.placement.cluster_file.ClusterFile`); when it is a running cluster's
    file (``kafka-tiers cluster start`` writes broker addresses and no assignments), with the
    current assignments of every topic that cluster holds, so that a placement continues an
    existing topic and balances against the replicas already there. A cluster that does not
    answer (stopped) is one ``warning:`` line, and the file's brokers are used alone."""
    from kafka_tiers.api import ClusterView, TopicPartition
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.cluster.client import ClusterClient

    if not doc.bootstrap or doc.cluster.assignments:
        return doc.cluster
    from pathlib import Path

    from kafka_tiers.cli.admin_channel import admin_security

    try:
        # TLS between brokers: the brokers' identity next to cluster.json (their user only)
        with ClusterClient(doc.bootstrap, timeout=5,
                           security=admin_security(Path(path).parent)) as client:
            md = client.metadata()
    except KafkaTiersError as exc:
        click.echo(f"warning: {path}: the cluster at {','.join(doc.bootstrap)} did not answer "
                   f"({exc}); placing without its current topics", err=True)
        return doc.cluster
    assignments = {TopicPartition(t["topic"], p["partition"]): list(p["replicas"])
                   for t in md["topics"] if not t.get("error") for p in t["partitions"]}
    return ClusterView(doc.cluster.brokers, assignments)


def show_placement(plan: dict[Any, list[int]], cluster: Any, broker_ids: list[int] | None,
                   placer_name: str, max_rows: int = 40) -> None:
    """Print a placement for people: partitions, brokers, domains per level, figures."""
    from rich.table import Table

    from kafka_tiers.placement.quality import domain_levels, placement_quality

    out = console()
    replicas_lists = list(plan.values())
    quality = placement_quality(replicas_lists, cluster, broker_ids)
    used = sorted(quality.broker_replicas.counts)
    levels = domain_levels(used, cluster)
    first = next(iter(plan))
    title = (f"{first.topic}: {len(plan)} partitions from {first.partition}, RF "
             f"{quality.replication_factor}, placer {placer_name}")

    parts = Table(title=title, title_justify="left")
    parts.add_column("partition", justify="right")
    parts.add_column("replicas")
    parts.add_column("leader", justify="right")
    for name, _ in levels:
        parts.add_column(f"{name} spread", justify="right")
    for i, (tp, reps) in enumerate(plan.items()):
        if i >= max_rows:
            parts.add_row("...", f"{len(plan) - max_rows} more", "", *([""] * len(levels)))
            break
        spreads = [str(len({dom.get(r) for r in reps})) for _, dom in levels]
        parts.add_row(str(tp.partition), ", ".join(map(str, reps)), str(reps[0]), *spreads)
    out.print(parts)

    brokers = Table(title="per broker", title_justify="left")
    for col in ("broker", "rack", "replicas", "leaders", ""):
        brokers.add_column(col, justify="right" if col in ("broker", "replicas", "leaders")
                           else "left")
    peak = max(quality.broker_replicas.counts.values(), default=0) or 1
    for b in used:
        info = cluster.broker(b) if b in cluster else None
        rack = (info.rack or "-") if info else "?"
        if info and info.fenced:
            rack += " (fenced)"
        n = quality.broker_replicas.counts[b]
        brokers.add_row(str(b), rack, str(n), str(quality.broker_leaders.counts.get(b, 0)),
                        "█" * max(1, round(20 * n / peak)) if n else "")
    out.print(brokers)

    for lv in quality.levels:
        table = Table(title=f"per {lv.name} ({lv.domains} domains)", title_justify="left")
        for col in ("domain", "replicas", "leaders"):
            table.add_column(col, justify="left" if col == "domain" else "right")
        for dom in sorted(lv.replicas.counts):
            table.add_row(str(dom), str(lv.replicas.counts[dom]),
                          str(lv.leaders.counts.get(dom, 0)))
        out.print(table)

    figures = Table(title="balance (max - min)", title_justify="left")
    for col in ("scope", "what", "min", "max", "spread"):
        figures.add_column(col)
    for row in quality.rows():
        figures.add_row(*row)
    out.print(figures)


__all__ = ["live_cluster_view", "place", "show_placement", "with_running_topics"]
