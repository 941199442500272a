"""``python -m kafka_tiers`` is the ``kafka-tiers`` command (the same entry point and error
boundary: :func:`kafka_tiers.cli.main` exits with the command's status)."""

from kafka_tiers.cli import main

if __name__ == "__main__":
    main()
