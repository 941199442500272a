"""A cluster member learns its assignments from the metadata store before it loads any log: a
replica the store does not assign to it is renamed ``-delete`` with its content untouched (it
was truncated to 0 bytes by start-up recovery, then renamed). With a log dir offline, only
replicas the controller marks new are created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.log_dir_failure import LogDirOfflineError

USER_DATA = b"user data\n"
SEGMENT = "00000000000000000000.log"


def test_an_unassigned_replica_is_never_recovered_before_its_delete(make_cluster: Any) -> None:
    c = make_cluster(1)
    client = c.client()
    client.create_topic("kept", 1, 1)
    client.wait_for_leaders("kept", 20)
    client.produce("kept", 0, ["k1", "k2"])
    c.stop_broker(1, controlled=False)
    d = Path(c.broker_config(1)["log.dirs"].split(",")[0])
    (d / "bar-0").mkdir()
    (d / "bar-0" / SEGMENT).write_bytes(USER_DATA)
    (d / ".kafka_cleanshutdown").unlink(missing_ok=True)  # a recovery start
    c.start_broker(1)
    c.wait_until(lambda: c.controller_id() == 1, 20, "controller")
    assert not (d / "bar-0").exists()
    (renamed,) = [p for p in d.iterdir() if p.name.startswith("bar-0.")]
    assert renamed.name.endswith("-delete")
    assert (renamed / SEGMENT).read_bytes() == USER_DATA  # renaming it back restores it
    assert [r.value for r in c.client().read_all("kept", 0, timeout=10)] == [b"k1", b"k2"]


def test_with_a_dir_offline_only_new_replicas_are_created(make_cluster: Any) -> None:
    """Kafka's ``getOrCreateLog(isNew)``: the controller marks the replicas it creates
    ``is_new``; any other LeaderAndIsr never creates a replica while a log dir is offline
    (its log may be on the dead disk: it would come back empty and reuse offsets)."""
    c = make_cluster(1, log_dirs_per_broker=2)
    client = c.client()
    lm = c.broker(1).log_manager
    dead, alive = lm.log_dirs
    lm.mark_log_dir_offline(dead, OSError(5, "Input/output error"))
    client.create_topic("fresh", 1, 1)  # new: created in the live dir
    client.wait_for_leaders("fresh", 20)
    assert lm.log_dir_of(TopicPartition("fresh", 0)) == alive
    with pytest.raises(LogDirOfflineError, match="not a new replica"):
        lm.get_or_create_log(TopicPartition("old", 0), is_new=False)
    assert not (alive / "old-0").exists()
