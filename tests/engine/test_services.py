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


SDK_SCRIPT = """
import gc, sys
from engine.config import load_settings
from engine.services import build_services
settings = load_settings({
    "THOUGHTMAP_HOME": sys.argv[1], "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"
})
services = build_services(settings)
at_start = gc.get_freeze_count()
assert "openai" not in sys.modules  # the SDK is loaded by the first client, not at start-up
services.llm("openai")
with_sdk = gc.get_freeze_count()
stray = [object()]  # made after the SDK's freeze: stays with the collector
services.llm("openai")
print(at_start, with_sdk, gc.get_freeze_count(), gc.is_tracked(stray), any(o is stray for o in gc.get_objects()))
services.close()
"""


def test_the_first_llm_client_freezes_the_openai_sdk_it_loaded(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    at_start, with_sdk, after_again, tracked, collectable = done.stdout.split()
    # The SDK's modules and pydantic models (about 50,000 objects) left the collector's walks once;
    # asking for the client again froze nothing more, and what came after is collected as before.
    assert int(with_sdk) - int(at_start) > 10_000
    assert int(after_again) == int(with_sdk)
    assert (tracked, collectable) == ("True", "True")
