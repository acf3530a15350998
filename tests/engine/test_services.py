"""`build_services`: what it does to the process beyond building the services."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: this test process's heap was frozen by whichever test built services first.
SCRIPT = """
import gc, sys
from engine.config import load_settings
from engine.services import build_services
settings = load_settings({"THOUGHTMAP_HOME": sys.argv[1]})
assert gc.get_freeze_count() == 0
first = build_services(settings)
frozen = gc.get_freeze_count()
stray = [object()]  # made after the first build: stays with the collector
second = build_services(settings)
print(frozen, gc.get_freeze_count(), gc.is_tracked(stray), any(o is stray for o in gc.get_objects()))
first.close(); second.close()
"""


def test_the_first_services_built_freeze_the_start_up_heap_once(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    frozen, after_second, tracked, collectable = done.stdout.split()
    # The modules and the first services left the collector's walks; the second build froze nothing more.
    assert int(frozen) > 10_000
    assert int(after_second) == int(frozen)
    assert (tracked, collectable) == ("True", "True")
