"""``serve --processes N``: N broker processes of one Kafka cluster on one host (docs/scaling.md).

Nothing here is imported by a one-process ``serve``. ``layout`` (nodes, ports, data dirs, the
cluster file), ``placement`` (which node leads a partition), ``supervisor`` (the parent process),
``metadata_log`` (topics agreed by every node), ``admin`` and its ``*_records`` (ACLs, quotas,
SCRAM users, features and broker configs agreed by every node), ``node`` (what a broker process of the cluster
holds).
"""
