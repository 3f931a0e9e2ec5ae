"""The broker's partition replicas: logs on disk, the replica manager (leader
and follower per partition, as committed metadata says), follower fetchers.

Decisions come from `broker_agent.replication` (pure rules); this package does
the I/O and the waiting. The Kafka wire protocol lives in `broker_agent.kafka`
and calls in through `ReplicaManager`; followers reach leaders through the
`LeaderFetchClient` seam (over the wire in production, in memory in tests).
"""
