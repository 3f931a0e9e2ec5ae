"""The gRPC edge every process shares, above the floor (`quorum.common`).

Kafka's error names on gRPC statuses in both directions (`wire_errors`: it
knows the Raft protocol's `ErrorCode` and the admin API's `ApiError`), and the
server every process runs (`servers`): the guards that answer a malformed
request with INVALID_REQUEST and any servicer exception with a proper status.
Channels, TLS and the properties framework stay in `quorum.common`, which
imports nothing above it.
"""
