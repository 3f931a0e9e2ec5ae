"""`quorumctl`, the operator's command line: one click group per module."""
