"""``python -m kafka_tiers`` is the ``kafka-tiers`` command."""

import sys

from kafka_tiers.cli import main

if __name__ == "__main__":
    sys.exit(main())
