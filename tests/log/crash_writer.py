"""A writer process for the crash tests: appends records forever, flushing and checkpointing
now and then, and reports each flushed offset on stdout. The test SIGKILLs it.

Usage: python crash_writer.py LOG_DIR SEED
Every record at offset ``o`` has the value ``rec-<o>`` so a reader can check it.
"""

from __future__ import annotations

import random
import sys

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, build_batch

CONFIG = LogConfig(segment_bytes=8192, index_interval_bytes=512, max_index_size=8192,
                   retention_ms=-1)
TP = TopicPartition("crash", 0)


def main() -> None:
    log_dir, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    manager = LogManager([log_dir], CONFIG, sanity_check_all=bool(seed % 2))
    manager.startup()
    log = manager.get_or_create_log(TP)
    print(f"start {log.log_end_offset}", flush=True)
    appends = 0
    while True:
        n = rng.randint(1, 5)
        leo = log.log_end_offset
        recs = [ProducerRecord(b"rec-%d" % (leo + i), b"k", (), 1_000 + leo + i)
                for i in range(n)]
        log.append(build_batch(recs, compression=rng.choice(["none", "lz4", "gzip"])),
                   leader_epoch=seed)
        appends += 1
        if appends % rng.randint(3, 12) == 0:
            log.flush()
            manager.checkpoint()
            print(f"flushed {log.recovery_point}", flush=True)


if __name__ == "__main__":
    main()
