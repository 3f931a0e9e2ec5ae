"""The features (KIP-584) this controller knows, and the levels it can run at."""

from __future__ import annotations

# name -> (min, max) level.
SUPPORTED_FEATURES = {"metadata.version": (1, 1), "kraft.version": (0, 1)}
