"""``file.delete.delay.ms`` is a Kafka long: any value up to 2**63-1 keeps the deleter alive."""

from __future__ import annotations

import time
from pathlib import Path

from kafka_tiers.log.dir_deleter import DirDeleter


def test_the_longest_delay_keeps_the_directory_and_the_deleter_thread(tmp_path: Path) -> None:
    deleter = DirDeleter(2**63 - 1)  # a wait this long overflows threading's timeout
    doomed = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    doomed.mkdir()
    deleter.schedule(doomed)
    time.sleep(0.2)
    thread = deleter._thread
    assert thread is not None and thread.is_alive()
    assert deleter.pending == [doomed] and doomed.exists()
    assert deleter.close(timeout=2.0)  # not due: dropped, left for the next start-up
    assert doomed.exists()
