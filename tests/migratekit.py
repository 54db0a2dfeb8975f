"""What the migration tests share: settings files written and read, the home's hook ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def hook_ids(home: Path) -> list[str]:
    hooks = home / "hooks"
    return sorted(p.name for p in hooks.iterdir()) if hooks.exists() else []
