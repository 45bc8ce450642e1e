"""``python benchmarks/workers/entry.py MODULE:FUNCTION 'JSON-ARGS'`` -- run one worker function.

Prints ``RESULT {json}`` (the function's dict, ``status`` = ok), or a result with ``status`` =
``n/a`` (NotImplementedError, e.g. the icesql hooks before the engine lands) or ``error``.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    target, raw = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}"
    mod_name, fn_name = target.split(":")
    args = json.loads(raw)
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(mod_name if "." in mod_name else f"benchmarks.workers.{mod_name}")
        result = getattr(mod, fn_name)(**args)
        result.setdefault("status", "ok")
        rc = 0
    except NotImplementedError as e:
        result = {"status": "n/a", "reason": str(e) or "not implemented"}
        rc = 0
    except Exception as e:  # noqa: BLE001 - reported to the parent
        traceback.print_exc()
        result = {"status": "error", "error": f"{type(e).__name__}: {e}"[:2000],
                  "traceback_tail": traceback.format_exc()[-1500:]}
        rc = 1
    result.setdefault("worker_seconds", round(time.perf_counter() - t0, 3))
    sys.stdout.write("RESULT " + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
