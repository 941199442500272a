"""A cluster member learns its assignments from the metadata store before it loads any log: a
replica the store does not assign to it is renamed ``-delete`` with its content untouched (it
was truncated to 0 bytes by start-up recovery, then renamed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
