"""A KRaft-style Raft metadata quorum: controllers, brokers, snapshots and tools."""
