"""Benchmarks for kafka-sidecar (``python -m bench.run``) and the reference-Kafka launcher
(``bench.reference``, also meant for conformance tests). Not part of the installed package."""
