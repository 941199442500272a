"""One ``cluster.json`` schema: what ``kafka-tiers cluster start`` writes is what ``kafka-tiers
place --cluster`` (and every other reader) reads, through one writer and one reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.api import BrokerInfo, ClusterView, InvalidClusterError
from kafka_tiers.cli import cli
from kafka_tiers.placement.cluster_file import (
    ClusterFile,
    cluster_file_from_dict,
    load_cluster,
    read_cluster_file,
    write_cluster_file,
)
from tests.cluster.processes import cluster_start


def test_addresses_and_metadata_store_round_trip(tmp_path: Path) -> None:
    doc = ClusterFile(
        ClusterView([BrokerInfo(1, "/dc1/r1"), BrokerInfo(2, "/dc1/r2", fenced=True),
                     BrokerInfo(3, None)]),
        addresses={1: "127.0.0.1:9092", 2: "127.0.0.1:9093", 3: "127.0.0.1:9094"},
        metadata_store="embedded")
    path = tmp_path / "cluster.json"
    write_cluster_file(path, doc)
    read = read_cluster_file(path)
    assert read.cluster.brokers == doc.cluster.brokers
    assert (read.addresses, read.metadata_store) == (doc.addresses, doc.metadata_store)
    assert json.loads(path.read_text())["brokers"][0] == {
        "id": 1, "rack": "/dc1/r1", "address": "127.0.0.1:9092"}
    assert doc.bootstrap == ["127.0.0.1:9092", "127.0.0.1:9094"]  # not the fenced broker
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@pytest.mark.parametrize(("doc", "fragment"), [
    ({"brokers": [{"id": 1}], "bootstrap": ["h:1"]}, "c.json: unknown field 'bootstrap'"),
    ({"brokers": {"1": "h:1"}}, "\"brokers\" must be a non-empty list"),
    ({"brokers": [{"id": 1, "address": 9092}]}, "brokers[0].address: expected \"host:port\""),
    ({"brokers": [{"id": 1}], "metadata_store": 1}, "\"metadata_store\": expected a string"),
])
def test_bad_documents(doc: object, fragment: str) -> None:
    with pytest.raises(InvalidClusterError) as err:
        cluster_file_from_dict(doc, "c.json")
    assert fragment in str(err.value)


def test_an_address_of_an_unknown_broker_is_refused() -> None:
    with pytest.raises(InvalidClusterError, match="broker 9, which is not in the cluster"):
        ClusterFile(ClusterView([BrokerInfo(1, None)]), addresses={9: "h:1"})


def test_cluster_start_writes_what_place_reads(tmp_path: Path) -> None:
    d = tmp_path / "c"
    with cluster_start(d):
        written = read_cluster_file(d / "cluster.json")
        assert [(b.broker_id, b.rack) for b in written.cluster.brokers] == [
            (1, "/dc1/r1"), (2, "/dc1/r2"), (3, "/dc2/r1")]
        assert written.metadata_store == "embedded"
        assert sorted(written.addresses) == [1, 2, 3]
        assert all(a.startswith("127.0.0.1:") for a in written.addresses.values())
        assert load_cluster(d / "cluster.json").brokers == written.cluster.brokers

        result = CliRunner().invoke(cli, [
            "place", "--cluster", str(d / "cluster.json"), "--partitions", "6",
            "--replication-factor", "3", "--topic", "orders", "--format", "json"])
        assert result.exit_code == 0, result.output
        plan = json.loads(result.output)
        assert len(plan["partitions"]) == 6
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in plan["partitions"])

        # the cluster commands find the brokers through the same file
        result = CliRunner().invoke(cli, ["cluster", "describe", "--dir", str(d),
                                          "--format", "json"])
        assert result.exit_code == 0, result.output
        assert sorted(b["broker_id"] for b in json.loads(result.output)["brokers"]) == [1, 2, 3]
