"""Snapshots of the metadata image: RocksDB-backed writer and reader, retention,
the policy deciding when to take one, and chunked transfer to lagging nodes
(KIP-630's FetchSnapshot)."""
