"""The packet-level fault tests import their helpers by module name, like the rest
of tests/faults (whose conftest puts tests/faults and tests/integration on the path)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
