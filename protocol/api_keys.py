"""Kafka's API keys and their names (``org.apache.kafka.common.protocol.ApiKeys``).

The names are what Kafka prints (the authorizer's log lines, the tools); what kafka-sidecar
serves, and at which versions, is ``server.dispatch.SUPPORTED_APIS``.
"""

from __future__ import annotations

API_NAMES: dict[int, str] = dict(enumerate([
    "Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica", "UpdateMetadata",
    "ControlledShutdown", "OffsetCommit", "OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat",
    "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions",
    "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit",
    "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs", "AlterConfigs",
    "AlterReplicaLogDirs", "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions",
    "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken",
    "DescribeDelegationToken", "DeleteGroups", "ElectLeaders", "IncrementalAlterConfigs",
    "AlterPartitionReassignments", "ListPartitionReassignments", "OffsetDelete",
    "DescribeClientQuotas", "AlterClientQuotas", "DescribeUserScramCredentials",
    "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum",
    "AlterPartition", "UpdateFeatures", "Envelope", "FetchSnapshot", "DescribeCluster",
    "DescribeProducers", "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker",
    "DescribeTransactions", "ListTransactions", "AllocateProducerIds", "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe", "ControllerRegistration", "GetTelemetrySubscriptions", "PushTelemetry",
    "AssignReplicasToDirs", "ListConfigResources", "DescribeTopicPartitions", "ShareGroupHeartbeat",
    "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge", "AddRaftVoter", "RemoveRaftVoter",
    "UpdateRaftVoter", "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
    "DeleteShareGroupState", "ReadShareGroupStateSummary", "StreamsGroupHeartbeat",
    "StreamsGroupDescribe", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
]))


def api_name(api_key: int) -> str:
    """Kafka's name of ``api_key``, or the number for a key Kafka does not define."""
    return API_NAMES.get(api_key, str(api_key))
