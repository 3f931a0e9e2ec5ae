"""The sans-I/O Raft core (KIP-595): events in, effects out."""
