"""``kafka-tiers cluster ...`` and ``kafka-tiers topics ...``: run a cluster in one process,
and talk to a running cluster through the transport."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from kafka_tiers.cli.output import (
    FORMAT_OPTION,
    Seconds,
    broker_ids_callback,
    console,
    emit_json,
    parse_kv,
    read_json,
)

DEFAULT_DIR = "kafka-tiers-cluster"
CLUSTER_FILE = "cluster.json"


def parse_bootstrap(text: str, source: str) -> list[str]:
    """The ``host:port`` addresses of a comma-separated list (``--bootstrap-server``,
    ``$KAFKA_TIERS_BOOTSTRAP``), checked before any connection is tried.

    Raises:
        click.UsageError: an empty list, or an entry that is not ``host:port`` with a port
            from 1 to 65535; the message names ``source`` and the entry.
    """
    from kafka_tiers.placement.cluster_file import is_host_port

    servers = [b.strip() for b in text.split(",") if b.strip()]
    if not servers:
        raise click.UsageError(f"{source}: expected host:port[,host:port...], got {text!r}")
    for server in servers:
        if not is_host_port(server):
            raise click.UsageError(f"{source}: {server!r} is not host:port (a port from 1 to "
                                   "65535), e.g. 127.0.0.1:9092")
    return servers


class Target:
    """Where a command reaches a cluster: ``servers`` (``host:port``) and whether they are
    Kafka listeners (``kafka``: the Kafka protocol only) or the internal transport of a
    cluster started by ``kafka-tiers cluster start`` (its ``cluster.json``, in
    ``directory``, which also holds the admin channel's TLS identity when the brokers'
    internal transport is TLS: :mod:`kafka_tiers.cli.admin_channel`)."""

    def __init__(self, servers: list[str], kafka: bool,
                 directory: Path | None = None) -> None:
        self.servers = servers
        self.kafka = kafka
        self.directory = directory


def target(bootstrap: str | None, directory: str | None) -> Target:
    """Which cluster a command talks to, and how: ``--bootstrap-server``, else
    ``$KAFKA_TIERS_BOOTSTRAP`` (unless ``--dir`` is given): Kafka listeners, reached through
    the Kafka protocol only; else the ``cluster.json`` of ``--dir`` (default
    ./kafka-tiers-cluster): that cluster's internal transport; else Kafka's default listener
    127.0.0.1:9092.

    Raises:
        click.UsageError: a malformed address list (see :func:`parse_bootstrap`).
    """
    if bootstrap:
        return Target(parse_bootstrap(bootstrap, "--bootstrap-server"), True)
    env = os.environ.get("KAFKA_TIERS_BOOTSTRAP")
    if env and not directory:
        return Target(parse_bootstrap(env, "$KAFKA_TIERS_BOOTSTRAP"), True)
    path = Path(directory or DEFAULT_DIR) / CLUSTER_FILE
    if path.exists():
        from kafka_tiers.placement.cluster_file import read_cluster_file

        servers = read_cluster_file(path).bootstrap
        if servers:
            return Target(servers, False, path.parent)
    return Target(["127.0.0.1:9092"], True)


def open_client(where: Target, timeout: float = 15.0) -> Any:
    """A client of the cluster at ``where``: a
    :class:`~kafka_tiers.cli.kafka_admin.KafkaAdmin` (Kafka protocol) or a
    :class:`~kafka_tiers.cluster.client.ClusterClient` (internal transport; TLS with the
    brokers' own certificate when they secure it, for their user only); both offer the
    methods the commands use, with the same result shapes.

    The Kafka protocol client takes the security settings of ``--command-config`` (Kafka's
    client properties: ``security.protocol``, ``ssl.*``, ``sasl.*``).

    Raises:
        AdminChannelError: the brokers' key or its config is not the caller's, or is open to
            group or others (:func:`kafka_tiers.cli.admin_channel.channel_config`).
        click.UsageError: ``--command-config`` given for the internal transport of ``--dir``,
            or a property it does not understand.
    """
    command_config = _command_config()
    if where.kafka:
        from kafka_tiers.cli.kafka_admin import KafkaAdmin

        settings: dict[str, Any] = {}
        if command_config:
            from kafka_tiers.cli.command_config import client_settings

            settings = client_settings(command_config)
        return KafkaAdmin(where.servers, timeout=timeout, settings=settings)
    if command_config:
        raise click.UsageError("--command-config is for Kafka listeners (--bootstrap-server); "
                               "the cluster of --dir is reached through its internal transport "
                               "with the brokers' own identity")
    from kafka_tiers.cli.admin_channel import admin_security
    from kafka_tiers.cluster.client import ClusterClient

    security = admin_security(where.directory) if where.directory is not None else None
    return ClusterClient(where.servers, timeout=timeout, security=security)


_CONNECT = [
    click.option("--bootstrap-server", "bootstrap", metavar="HOST:PORT[,...]",
                 help="Kafka listeners to ask, through the Kafka protocol only (also an Apache "
                 "Kafka cluster; default: $KAFKA_TIERS_BOOTSTRAP, else the cluster started by "
                 "`kafka-tiers cluster start` in --dir, else 127.0.0.1:9092)."),
    click.option("--dir", "directory", type=click.Path(file_okay=False),
                 help=f"The directory of `kafka-tiers cluster start` (default ./{DEFAULT_DIR}); "
                 "when its brokers talk TLS, only the user owning their key may use it."),
]
#: ``--command-config FILE``: the Kafka client properties of ``--bootstrap-server`` (kept in
#: the click context for :func:`open_client`; commands take no argument for it)
COMMAND_CONFIG_OPTION = click.option(
    "--command-config", type=click.Path(dir_okay=False), expose_value=False,
    callback=lambda ctx, _p, v: ctx.meta.__setitem__(_COMMAND_CONFIG, v),
    help="Kafka client properties for --bootstrap-server: security.protocol, "
    "ssl.truststore.location, ssl.keystore.location, sasl.mechanism, sasl.jaas.config (as "
    "Kafka's tools take with --command-config).")
_CONNECT.append(COMMAND_CONFIG_OPTION)
#: where the ``--command-config`` path is kept in the click context
_COMMAND_CONFIG = "kafka_tiers.command_config"


def _command_config() -> str | None:
    """The ``--command-config`` of the running command, if any."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_COMMAND_CONFIG) if ctx is not None else None


def connect_options(fn: Any) -> Any:
    for opt in reversed(_CONNECT):
        fn = opt(fn)
    return fn


def _topic(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a legal topic name (Kafka's rule), or None when not given."""
    if value is not None:
        from kafka_tiers.log.errors import InvalidTopicError
        from kafka_tiers.log.names import validate_topic

        try:
            validate_topic(value)
        except InvalidTopicError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _client(bootstrap: str | None, directory: str | None) -> Any:
    return open_client(target(bootstrap, directory))


# ---------------------------------------------------------------------- cluster

@click.group()
def cluster() -> None:
    """Run a cluster in one process, describe a running one, reassign and elect leaders.

    \b
    Examples:
      kafka-tiers cluster start --brokers 3 --racks /dc1/r1,/dc1/r2,/dc2/r1
      kafka-tiers cluster describe
      kafka-tiers topics create orders --partitions 6 --replication-factor 3
      kafka-tiers cluster reassign --reassignment-json-file plan.json --execute
    """


#: Keys ``cluster start`` sets per broker: given in --config or --set, they are ignored with a
#: warning. ``listeners`` (the Kafka listener: 127.0.0.1 on --base-port + n - 1, or a free
#: port) and ``advertised.listeners`` differ per broker; ``port`` is the internal transport
#: (any free port).
PER_BROKER_KEYS = ("broker.id", "node.id", "log.dirs", "log.dir", "port", "listeners",
                   "advertised.listeners", "broker.rack")


def _kafka_cluster(base_port: int, **kwargs: Any) -> Any:
    """A :class:`~kafka_tiers.cluster.local_cluster.LocalCluster` whose broker n opens a
    Kafka listener on 127.0.0.1:``base_port + n - 1`` (``base_port`` 0: any free port); the
    internal transport takes any free port."""
    from kafka_tiers.cluster.local_cluster import LocalCluster

    class KafkaListenersCluster(LocalCluster):
        def broker_config(self, broker_id: int) -> dict[str, str]:
            cfg = super().broker_config(broker_id)
            port = base_port + broker_id - 1 if base_port else 0
            cfg["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
            return cfg

    return KafkaListenersCluster(base_port=0, **kwargs)


@cluster.command("start")
@click.option("--brokers", type=click.IntRange(min=1, max=64), default=3, show_default=True)
@click.option("--racks", help="Comma-separated racks, one per broker (cycled), e.g. "
              "/dc1/r1,/dc1/r2,/dc2/r1.")
@click.option("--metadata-store", type=click.Choice(["embedded", "zookeeper"]),
              default="embedded", show_default=True)
@click.option("--zookeeper-connect", help="With --metadata-store zookeeper: host:port[/chroot].")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=DEFAULT_DIR,
              show_default=True, help="Where the brokers' log dirs and the metadata live.")
@click.option("--base-port", type=click.IntRange(min=0, max=65000), default=0,
              show_default=True, help="Broker n's Kafka listener is 127.0.0.1:base-port+n-1 "
              "(0: any free port; the bootstrap address is printed).")
@click.option("--placer", help="broker.replica.placer for every broker (default rack-aware).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="server.properties whose keys every broker takes (ids, dirs, listeners and "
              "ports are set per broker).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="A broker config value for every broker (repeatable).")
@click.option("--status-interval", type=Seconds(maximum=3600), default=2.0, show_default=True,
              help="Seconds between status checks (the table is printed when it changes).")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
@FORMAT_OPTION
def start(brokers: int, racks: str | None, metadata_store: str, zookeeper_connect: str | None,
          directory: str, base_port: int, placer: str | None, config_path: str | None,
          settings: tuple[str, ...], status_interval: float, log_level: str, fmt: str) -> None:
    """Start a cluster of brokers in this process, in the foreground, until Ctrl-C.

    Every broker opens a Kafka listener on 127.0.0.1 (a free port, or --base-port + n - 1),
    so Kafka clients (kcat, confluent-kafka, kafka-python) and `kafka-tiers ...
    --bootstrap-server` reach it; the bootstrap address is printed once the cluster runs
    (with --format json: one JSON line with "bootstrap_servers" and each broker's listener).
    offsets.topic.replication.factor is min(3, --brokers) unless given, so consumer groups
    work on 1 or 2 brokers too.
    The brokers' internal transport (racks, addresses) is written to <dir>/cluster.json,
    which `kafka-tiers place --cluster` and the commands given --dir read. A status table
    (brokers, controller, partitions) is printed at start and whenever it changes. Ctrl-C
    stops every broker cleanly; starting again on the same --dir keeps the topics and their
    data (embedded store: <dir>/metadata). SIGTERM or Ctrl-C ends the process within
    broker.shutdown.timeout.ms: exit code 0 after a clean shutdown, 1 with one ERROR line
    when it did not finish in time (logs flushed).
    """
    from kafka_tiers.cli.broker import setup_logging
    from kafka_tiers.cli.stopping import TIMEOUT_KEY, StopOnSignal
    from kafka_tiers.config import read_properties

    setup_logging(log_level)
    overrides: dict[str, str] = {}
    if config_path:
        overrides.update(read_properties(config_path))
    overrides.update(parse_kv(settings, "--set"))
    if placer:
        overrides["broker.replica.placer"] = placer
    if metadata_store == "zookeeper" and not (zookeeper_connect or
                                               overrides.get("zookeeper.connect")):
        raise click.UsageError("--metadata-store zookeeper needs --zookeeper-connect")
    from kafka_tiers.cli.config import print_config_warnings
    from kafka_tiers.config import BrokerConfig

    shared = BrokerConfig(overrides)  # the same errors and warnings as config show
    print_config_warnings(shared.warnings)
    shared.check_plugins()
    ignored = [f"{key}={overrides.pop(key)}" for key in PER_BROKER_KEYS if key in overrides]
    if ignored:  # cluster start sets these per broker: say so rather than drop them silently
        print_config_warnings([
            f"{', '.join(ignored)} ignored: cluster start gives each broker its own id, log "
            "dirs, listeners, ports and rack (--brokers, --dir, --base-port, --racks); remove "
            f"{'it' if len(ignored) == 1 else 'them'} from --config/--set"])
    # a dev cluster of 1 or 2 brokers serves consumer groups too: Kafka's default 3 would
    # leave FindCoordinator answering COORDINATOR_NOT_AVAILABLE forever
    overrides.setdefault("offsets.topic.replication.factor", str(min(3, brokers)))
    rack_list = [r.strip() for r in racks.split(",")] if racks is not None else None
    if rack_list is not None and not all(rack_list):
        raise click.BadParameter(f"expected comma-separated non-empty racks, got {racks!r}",
                                 param_hint="--racks")
    c = _kafka_cluster(base_port, directory=directory, brokers=brokers, racks=rack_list,
                       overrides=overrides, transport="tcp", metadata_store=metadata_store,
                       zookeeper_connect=zookeeper_connect, fast_failure=False)
    # SIGTERM / SIGINT: every broker stops cleanly, and the process ends within
    # broker.shutdown.timeout.ms of the signal whatever those shutdowns do
    def flush_all() -> None:
        for b in c.live:
            c.broker(b).flush_logs()

    guard = StopOnSignal(shared[TIMEOUT_KEY], "the cluster", flush=flush_all).install()
    stop = guard.requested
    c.start()
    try:
        from kafka_tiers.api.cluster import BrokerInfo, ClusterView
        from kafka_tiers.placement.cluster_file import ClusterFile, write_cluster_file

        write_cluster_file(Path(directory, CLUSTER_FILE), ClusterFile(
            ClusterView([BrokerInfo(b, c.broker_config(b).get("broker.rack")) for b in c.live]),
            addresses={b: c.broker(b).address for b in c.live}, metadata_store=metadata_store))
        from kafka_tiers.cli.admin_channel import write_channel_file

        # TLS between brokers: the commands given --dir connect with the brokers' identity
        write_channel_file(directory, c.broker(c.live[0]).config)
        client = c.client()
        if fmt == "json":  # one line: a reader takes it as soon as the cluster runs
            import json

            click.echo(json.dumps({"event": "running", "brokers": [
                {"broker_id": b, "rack": c.broker_config(b).get("broker.rack"),
                 "bootstrap_servers": c.broker(b).bootstrap_servers,
                 "internal_address": c.broker(b).address} for b in c.live],
                "bootstrap_servers": c.bootstrap_servers, "dir": str(directory)}))
        else:
            click.echo(f"cluster of {brokers} broker(s) running; bootstrap "
                       f"{c.bootstrap_servers} (Kafka listeners); Ctrl-C stops it")
        last = None
        while True:
            try:
                # the address column: each broker's Kafka listener (what clients are given)
                status = _status(client.metadata(),
                                 {b: c.broker(b).bootstrap_servers for b in c.live})
            except Exception as exc:  # keep serving; report
                status = {"error": str(exc)}
            if status != last and fmt != "json":
                _print_status(status)
                last = status
            if stop.wait(status_interval):
                break
    finally:
        click.echo("stopping the cluster", err=True)
        for b in c.live:
            c.stop_broker(b, controlled=len(c.live) > 1)
        c.close()
        guard.done()


def _status(md: dict[str, Any], addresses: dict[int, str] | None = None) -> dict[str, Any]:
    parts = [p for t in md["topics"] for p in t["partitions"]]
    shown = addresses or {}
    return {
        "controller": md["controller"],
        "brokers": [(b["broker_id"], shown.get(b["broker_id"]) or f"{b['host']}:{b['port']}",
                     b["rack"] or "") for b in md["brokers"]],
        "topics": len(md["topics"]),
        "partitions": len(parts),
        "offline": sum(1 for p in parts if p["leader"] < 0),
        "under_replicated": sum(1 for p in parts if len(p["isr"]) < len(p["replicas"])),
        "leaders": {b["broker_id"]: sum(1 for p in parts if p["leader"] == b["broker_id"])
                    for b in md["brokers"]},
    }


def _print_status(status: dict[str, Any]) -> None:
    from rich.table import Table

    if "error" in status:
        console().print(f"[red]status unavailable: {status['error']}[/red]")
        return
    table = Table(title=f"controller: broker {status['controller']} | topics "
                  f"{status['topics']} | partitions {status['partitions']} | offline "
                  f"{status['offline']} | under-replicated {status['under_replicated']}")
    for col in ("broker", "address", "rack", "leaders"):
        table.add_column(col)
    for b, addr, rack, in status["brokers"]:
        mark = " (controller)" if b == status["controller"] else ""
        table.add_row(f"{b}{mark}", addr, rack, str(status["leaders"].get(b, 0)))
    console().print(table)


@cluster.command("describe")
@connect_options
@FORMAT_OPTION
def describe(bootstrap: str | None, directory: str | None, fmt: str) -> None:
    """Brokers (address, rack), the controller and every partition's leader and ISR."""
    with _client(bootstrap, directory) as client:
        md = client.metadata()
    if fmt == "json":
        emit_json(md)
        return
    _print_status(_status(md))
    _print_partitions(md["topics"])


def _print_partitions(topics: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table()
    for col in ("topic", "partition", "replicas", "leader", "epoch", "isr"):
        table.add_column(col)
    for t in topics:
        for p in t["partitions"]:
            leader = str(p["leader"]) if p["leader"] >= 0 else "[red]none[/red]"
            table.add_row(t["topic"], str(p["partition"]), ",".join(map(str, p["replicas"])),
                          leader, str(p["leader_epoch"]), ",".join(map(str, p["isr"])))
    console().print(table)


@cluster.command("reassign")
@connect_options
@click.option("--reassignment-json-file", "json_file", required=True,
              type=click.Path(dir_okay=False, exists=True),
              help='Kafka\'s reassignment JSON, with document 000\'s "log_dirs" per replica.')
@click.option("--execute", "action", flag_value="execute", help="Start the reassignment.")
@click.option("--verify", "action", flag_value="verify",
              help="Report whether every partition has its new replicas (and log dirs).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="With --execute: wait until the controller finished.")
@click.option("--timeout", type=Seconds(), default=300.0, show_default=True,
              help="Seconds --execute --wait waits for the controller to finish.")
@FORMAT_OPTION
def reassign(bootstrap: str | None, directory: str | None, json_file: str, action: str | None,
             wait: bool, timeout: float, fmt: str) -> None:
    """Move replicas between brokers (and into given log dirs) through the controller.

    Document 003 section F: the new replicas join (AR + RAR) and catch up, leadership moves
    into the new set, the old replicas are removed. A "log_dirs" entry other than "any"
    puts the new replica in that log dir of its broker (document 000 section 2); a replica
    already on that broker is moved between its dirs.
    """
    if action is None:
        raise click.UsageError("give --execute or --verify")
    reassign_on_cluster(target(bootstrap, directory), json_file, action, wait=wait,
                        timeout=timeout, fmt=fmt)


def reassign_on_cluster(where: Target, json_file: str, action: str, *, wait: bool,
                        timeout: float, fmt: str) -> None:
    """Run a reassignment file through the cluster's controller and report per partition
    (``cluster reassign``, and ``kafka-tiers reassign --bootstrap-server``); exits 0 when
    every partition is done (or, with --execute --no-wait, once submitted)."""
    from kafka_tiers.api.errors import KafkaTiersError
    from kafka_tiers.broker.admin_channel import ReassignmentError, parse_reassignment

    doc = read_json(json_file)
    try:
        parse_reassignment(doc)
    except ReassignmentError as exc:
        raise KafkaTiersError(f"{json_file}: {exc}") from None
    rows = run_reassignment(where, doc, action, wait=wait, timeout=timeout)
    if fmt == "json":
        emit_json({"action": action, "partitions": rows})
    else:
        for r in rows:
            click.echo(f"{r['topic']}-{r['partition']}: {r['state']} (replicas "
                       f"{r['replicas']}, wanted {r['wanted']})")
    raise SystemExit(0 if all(r["state"] == "done" for r in rows) or
                     (action == "execute" and not wait) else 1)


def run_reassignment(where: Target, doc: dict[str, Any], action: str, *,
                     wait: bool = True, timeout: float = 300.0) -> list[dict[str, Any]]:
    """Execute (``action="execute"``) or verify a reassignment document (Kafka's JSON with
    ``log_dirs``) on the cluster at ``where``; one row per partition
    (``topic``, ``partition``, ``state``: done / in progress / not done / log dir not
    reached, ``replicas``, ``wanted``).

    Through the Kafka protocol: AlterReplicaLogDirs for the replicas given a log dir, then
    AlterPartitionReassignments; with ``wait``, ListPartitionReassignments until none of
    the file's partitions is pending, then AlterReplicaLogDirs again for a replica not yet in
    its dir (its broker moves it) until DescribeLogDirs shows every one in place.

    Raises:
        KafkaTiersError: with ``wait``, the reassignment did not finish in ``timeout``.
        TransportError / KafkaAdminError: the cluster cannot be reached, or refused.
    """
    import time

    from kafka_tiers.api.errors import KafkaTiersError

    entries = doc["partitions"]
    with open_client(where, timeout=15) as client:
        if action == "execute":
            client.reassign(entries)
            deadline = time.monotonic() + timeout
            mine = {(e["topic"], int(e["partition"])) for e in entries}
            while wait:
                pending = {(r["topic"], r["partition"]) for r in client.reassignments()}
                rows = None
                if not pending & mine:
                    rows = verify_rows(client, entries)
                    if not where.kafka or all(r["state"] == "done" for r in rows):
                        return rows
                    client.alter_log_dirs(entries)  # the new replicas exist now
                if time.monotonic() > deadline:
                    raise KafkaTiersError("the reassignment did not finish in time "
                                          "(it continues; follow with --verify)")
                time.sleep(0.2)
        return verify_rows(client, entries)


def verify_rows(client: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per partition: done when the replicas are the wanted ones, in the wanted log dirs (a
    replica's -future copy does not count until it took the replica's place)."""
    pending = {(e["topic"], int(e["partition"])) for e in client.reassignments()}
    dirs_of: dict[int, dict[tuple[str, int], str]] = {}
    rows = []
    for e in entries:
        key = (e["topic"], int(e["partition"]))
        cur = next(p for p in client.describe_topic(e["topic"])
                   if p["partition"] == key[1])
        state = "in progress" if key in pending else (
            "done" if cur["replicas"] == list(e["replicas"]) else "not done")
        for b, d in zip(e["replicas"], e.get("log_dirs") or [], strict=False):
            if d == "any" or state != "done":
                continue
            if b not in dirs_of:
                dirs_of[b] = {(rep["topic"], rep["partition"]): ld["path"]
                              for ld in client.describe_log_dirs(b)
                              for rep in ld["partitions"] if not rep.get("is_future")}
            if os.path.normpath(dirs_of[b].get(key, "")) != os.path.normpath(d):
                state = "log dir not reached"
        rows.append({"topic": key[0], "partition": key[1], "state": state,
                     "replicas": cur["replicas"], "wanted": list(e["replicas"])})
    return rows


@cluster.command("elect-leaders")
@connect_options
@click.option("--topic", callback=_topic, help="Only this topic's partitions.")
def elect_leaders(bootstrap: str | None, directory: str | None, topic: str | None) -> None:
    """Preferred-leader election: move leadership back to each partition's first replica."""
    with _client(bootstrap, directory) as client:
        parts = None
        if topic:
            parts = [(topic, p["partition"]) for p in client.describe_topic(topic)]
        for tp, outcome in sorted(client.elect_preferred_leaders(parts).items()):
            click.echo(f"{tp}: {outcome}")


# ---------------------------------------------------------------------- topics

@click.group()
def topics() -> None:
    """Create, describe and delete topics of a running cluster; produce and consume.

    \b
    Examples:
      kafka-tiers topics create orders --partitions 6 --replication-factor 3
      kafka-tiers topics describe orders
      kafka-tiers topics list --bootstrap-server 127.0.0.1:9092
      kafka-tiers topics produce orders --partition 0 hello world
      kafka-tiers topics consume orders --partition 0
    """


@topics.command("create")
@click.argument("name", callback=_topic)
@connect_options
@click.option("--partitions", type=click.IntRange(min=1), help="Default: num.partitions.")
@click.option("--replication-factor", type=click.IntRange(min=1),
              help="Default: default.replication.factor.")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic-level config (repeatable).")
@click.option("--force-simple", is_flag=True, help="Place with the rack-unaware simple placer.")
@click.option("--broker-ids", callback=broker_ids_callback,
              help="Only these brokers, e.g. 1,2,3.")
@FORMAT_OPTION
def create(name: str, bootstrap: str | None, directory: str | None, partitions: int | None,
           replication_factor: int | None, configs: tuple[str, ...], force_simple: bool,
           broker_ids: list[int] | None, fmt: str) -> None:
    """Create a topic (or add --partitions partitions to one): the controller places the
    replicas through the cluster's placer (broker.replica.placer)."""
    from kafka_tiers.cluster.client import ClusterClient
    from kafka_tiers.cluster.transport import ErrorCode, TransportError

    with _client(bootstrap, directory) as client:
        try:
            asg = client.create_topic(name, partitions, replication_factor,
                                      parse_kv(configs), broker_ids=broker_ids,
                                      force_simple=force_simple)
        except TransportError as exc:  # (the Kafka-protocol client grows it on its own)
            if not (isinstance(client, ClusterClient) and partitions
                    and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS):
                raise
            current = len(client.describe_topic(name))
            asg = client.add_partitions(name, current + partitions, broker_ids=broker_ids,
                                        force_simple=force_simple)
    if fmt == "json":
        emit_json({"topic": name, "assignment": {str(p): r for p, r in asg.items()}})
    else:
        click.echo(f"created {len(asg)} partition(s) of {name}: " +
                   "; ".join(f"{p}: {','.join(map(str, r))}" for p, r in sorted(asg.items())))


@topics.command("describe")
@click.argument("name", required=False, callback=_topic)
@connect_options
@FORMAT_OPTION
def describe_topics(name: str | None, bootstrap: str | None, directory: str | None,
                    fmt: str) -> None:
    """Every partition's replicas, leader, leader epoch and ISR."""
    with _client(bootstrap, directory) as client:
        md = client.metadata([name] if name else None)
    for t in md["topics"]:
        if t["error"]:
            from kafka_tiers.api.errors import KafkaTiersError

            raise KafkaTiersError(f"unknown topic {t['topic']!r}")
    if fmt == "json":
        emit_json(md["topics"])
    else:
        _print_partitions(md["topics"])


@topics.command("list")
@connect_options
@FORMAT_OPTION
def list_topics(bootstrap: str | None, directory: str | None, fmt: str) -> None:
    """The names of the cluster's topics (Metadata), one a line."""
    with _client(bootstrap, directory) as client:
        md = client.metadata()
    names = sorted(t["topic"] for t in md["topics"] if not t["error"])
    if fmt == "json":
        emit_json(names)
    else:
        for n in names:
            click.echo(n)


@topics.command("delete")
@click.argument("name", callback=_topic)
@connect_options
def delete(name: str, bootstrap: str | None, directory: str | None) -> None:
    """Delete a topic and every replica's data."""
    with _client(bootstrap, directory) as client:
        client.delete_topic(name)
    click.echo(f"deleted {name}")


@topics.command("produce")
@click.argument("name", callback=_topic)
@click.argument("values", nargs=-1, required=True)
@connect_options
@click.option("--partition", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
def produce(name: str, values: tuple[str, ...], bootstrap: str | None, directory: str | None,
            partition: int, acks: str) -> None:
    """Append VALUES (one record each) to a partition through its leader.

    Each value is produced as the bytes given on the command line (UTF-8 text, or any other
    bytes as they are)."""
    with _client(bootstrap, directory) as client:
        base = client.produce(name, partition, [os.fsencode(v) for v in values],
                              acks=-1 if acks == "all" else int(acks))
    click.echo(f"{len(values)} record(s) at offsets {base}..{base + len(values) - 1}")


@topics.command("consume")
@click.argument("name", callback=_topic)
@connect_options
@click.option("--partition", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
@FORMAT_OPTION
def consume(name: str, bootstrap: str | None, directory: str | None, partition: int,
            offset: int, fmt: str) -> None:
    """Print the committed records of a partition (up to its high watermark)."""
    where = target(bootstrap, directory)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    with open_client(where) as client:
        if where.kafka:  # ListOffsets and Fetch, through a Kafka consumer
            out = client.fetch_all(name, partition, offset)
        while not where.kafka:
            recs, hw = client.fetch(name, partition, offset)
            recs = [r for r in recs if r.offset < hw]
            out.extend((r.offset, r.key, r.value) for r in recs)
            if not recs:
                break
            offset = recs[-1].offset + 1
    if fmt == "json":
        emit_json([{"offset": o, "key": _text(k), "value": _text(v)} for o, k, v in out])
    else:
        for o, _k, v in out:
            click.echo(f"{o}\t{_text(v)}")


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


__all__ = ["CLUSTER_FILE", "COMMAND_CONFIG_OPTION", "DEFAULT_DIR", "cluster", "parse_bootstrap",
           "reassign_on_cluster", "run_reassignment", "topics", "verify_rows"]
