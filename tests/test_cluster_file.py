"""cluster.json reading: good documents round-trip, bad ones give one line naming the place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_tiers.api import InvalidClusterError, TopicPartition
from kafka_tiers.placement.cluster_file import cluster_from_dict, cluster_to_dict, load_cluster

SAMPLE = Path(__file__).resolve().parents[1] / "kafka_tiers" / "samples" / \
    "multi-level-cluster.json"


def test_sample_cluster_loads() -> None:
    view = load_cluster(SAMPLE)
    assert len(view) == 12 and len(view.racks) == 6
    assert sum(b.fenced for b in view.brokers) == 1


def test_round_trip_with_assignments() -> None:
    doc = {"brokers": [{"id": 1, "rack": "r1"}, {"id": 2, "rack": "r2", "fenced": True,
                                                  "attributes": {"disk": "ssd"}}],
           "assignments": {"version": 1, "partitions": [
               {"topic": "t", "partition": 0, "replicas": [1, 2]}]}}
    view = cluster_from_dict(doc)
    assert view.assignments[TopicPartition("t", 0)] == (1, 2)
    assert cluster_from_dict(cluster_to_dict(view)).assignments == view.assignments
    assert cluster_to_dict(view) == doc


@pytest.mark.parametrize(("doc", "fragment"), [
    ([], "expected a JSON object"),
    ({"brokers": []}, "\"brokers\" must be a non-empty list"),
    ({"brokers": [{"rack": "r"}]}, "brokers[0]: \"id\" is missing"),
    ({"brokers": [{"id": "1"}]}, "brokers[0].id: expected an integer, got \"1\""),
    ({"brokers": [{"id": 1, "rakc": "r"}]}, "unknown field 'rakc'"),
    ({"brokers": [{"id": 1, "fenced": "no"}]}, "brokers[0].fenced: expected true or false"),
    ({"brokers": [{"id": 1}, {"id": 1}]}, "duplicate broker id 1"),
    ({"brokers": [{"id": -4}]}, "broker id must be >= 0"),
    ({"brokers": [{"id": 1}], "assignments": [{"topic": "t", "partition": 0}]},
     "assignments[0]: needs topic, partition and replicas"),
    ({"brokers": [{"id": 1}], "assignments": [
        {"topic": "t", "partition": 0, "replicas": [1]},
        {"topic": "t", "partition": 0, "replicas": [1]}]}, "t-0 is listed twice"),
    ({"brokers": [{"id": 1}, {"id": 2}], "assignments": [
        {"topic": "t", "partition": 0, "replicas": [2, 2]}]},
     "assignments[0].replicas: broker 2 is listed twice in partition 0 of topic 't'"),
    ({"brokers": [{"id": 1}, {"id": 2}], "assignments": [
        {"topic": "orders", "partition": 3, "replicas": [1, 7]}]},
     "assignments[0]: partition 3 of topic 'orders' names broker 7, which is not among the "
     "brokers [1, 2]"),
    ({"brokers": [{"id": 1}], "assignments": [{"topic": "t", "partition": 0, "replicas": []}]},
     "assignments[0]: partition 0 of topic 't' has no replicas"),
    ({"brokers": [{"id": 1}], "assignments": [
        {"topic": "a/b", "partition": 0, "replicas": [1]}]},
     "assignments[0].topic: topic name 'a/b' has characters other than"),
    ({"brokers": [{"id": 2**31}]}, "brokers[0].id: 2147483648 is larger than the largest"),
    ({"brokers": [{"id": 1, "address": "nohost:notaport"}]},
     "brokers[0].address: expected \"host:port\" (a port from 1 to 65535) or null, got "
     "\"nohost:notaport\""),
    ({"brokers": [{"id": 1, "address": "h:0"}]}, "brokers[0].address: expected \"host:port\""),
])
def test_bad_documents(doc: object, fragment: str) -> None:
    with pytest.raises(InvalidClusterError) as err:
        cluster_from_dict(doc, "c.json")
    assert fragment in str(err.value) and str(err.value).startswith("c.json")
    assert str(err.value).count("c.json") == 1, f"the file is named more than once: {err.value}"


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"brokers": [')
    with pytest.raises(InvalidClusterError, match=r"not valid JSON: .*line 1"):
        load_cluster(bad)
    with pytest.raises(InvalidClusterError, match="cannot read"):
        load_cluster(tmp_path / "missing.json")
    bad.write_text("[" * 100_000 + "]" * 100_000)  # deeper than the JSON parser goes
    with pytest.raises(InvalidClusterError, match=r"bad.json: not usable JSON: nested too deeply"):
        load_cluster(bad)
    bad.write_bytes(b'{"brokers": [{"id": 1, "rack": "\xff"}]}')
    with pytest.raises(InvalidClusterError, match=r"not valid JSON"):
        load_cluster(bad)
    bad.write_text(json.dumps({"brokers": [{"id": 1}]}))
    assert len(load_cluster(bad)) == 1
