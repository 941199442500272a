"""PySpark's hook for the ``kafka-tiers`` data source: PySpark 4 imports every top-level
``pyspark_*`` module on the Python path and registers its ``DefaultSource`` under
``DefaultSource.name()``, so ``spark.read.format("kafka-tiers")`` works with no registration
call once kafka-tiers is installed with its ``spark`` extra."""

from kafka_tiers.spark.datasource import KafkaTiersDataSource as DefaultSource

__all__ = ["DefaultSource"]
