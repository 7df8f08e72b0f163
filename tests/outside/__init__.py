"""Outside client suites (franz-go's kgo integration tests, librdkafka's test harness) run
against kafka-sidecar and the reference Apache Kafka: ``make outside`` (not part of ``make test``;
no file here is named ``test_*.py``, so pytest collects nothing from this package)."""
