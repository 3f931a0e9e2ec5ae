"""The seeds' replication rules as pure functions (the Raft core's style).

One partition's state goes in with an event (a follower fetch at offset X, a
local append, a tick, a metadata change) and decisions come out (a new high
watermark, an ISR shrink or expand to ask the controller for, a truncation
offset). Nothing here reads a clock, touches a file or a socket: the replica
manager in `broker_agent/partitions/` does the I/O and feeds time in.

Modules are named after what they decide:
    epochs.py    the leader-epoch lookup behind diverging-epoch truncation
    leader.py    Partition.scala's leader rules: HW, follower fetch state, ISR
    follower.py  the follower's HW and its truncation decision
    acks.py      acks=all and min.insync.replicas (seed 003)
"""
