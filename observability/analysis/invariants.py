"""Protocol invariant violations for checks.json.

For now they are read from the run's `summary.json` (`violations`, found online by the run's own
checker), not re-checked from the history by Spark: that is issue 13's part 3, not built yet.
A run directory without a summary reports none and says so (`source`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .anomalies import EXAMPLES
from .errors import AnalysisInputError


def summary_violations(run_dir: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """Violations per invariant name ({count, examples: [{at_ms, detail}]}), and where from."""
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        return {}, "none: no summary.json"
    try:
        violations = json.loads(path.read_text()).get("violations") or []
    except (json.JSONDecodeError, AttributeError) as exc:
        raise AnalysisInputError(f"{path}: not a run summary ({exc})") from None
    found: dict[str, dict[str, Any]] = {}
    for v in violations:
        entry = found.setdefault(v["invariant"], {"count": 0, "examples": []})
        entry["count"] += int(v.get("count", 1))  # the summary keeps the first one and a count
        if len(entry["examples"]) < EXAMPLES:
            entry["examples"].append({"at_ms": v.get("at_ms"), "detail": v.get("detail")})
    return dict(sorted(found.items())), "summary.json"
