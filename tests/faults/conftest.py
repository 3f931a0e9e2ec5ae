"""The fault tests import their helpers by module name (no packages under tests/),
and reuse tests/integration's cluster helpers."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent / "integration"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
