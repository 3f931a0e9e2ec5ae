"""The features (KIP-584) this controller knows, and the levels it can run at."""

from __future__ import annotations

# name -> (min, max) level. kraft.version is the Raft layer's: a FeatureLevel
# record never raises it; `quorum/server/kraft_upgrade.py` does, and the admin
# servicer shows its real range.
SUPPORTED_FEATURES = {"metadata.version": (1, 1), "kraft.version": (0, 0)}
