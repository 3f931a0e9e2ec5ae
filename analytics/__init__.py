"""Metadata-log analytics: the export schema, the Spark convergence job, charts."""
