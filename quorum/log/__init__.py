"""Durable storage for the metadata log and the quorum state."""
