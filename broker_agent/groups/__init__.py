"""The group coordinator (seed 002): classic consumer groups over `__consumer_offsets`.

`state.py` (the states and their transition table), `machine.py` (the pure
coordinator of every group of one broker: requests and time in, answers and
records out), `records.py` (`__consumer_offsets` keys and values as Kafka
writes them), `placement.py` (which offsets partition a group lives in), and
`coordinator.py` (the async driver: loads partitions it leads, writes through
the replica manager, parks JoinGroup and SyncGroup until the machine answers).
"""
