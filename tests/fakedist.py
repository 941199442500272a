"""Build real (unpacked) distributions with entry points in a temp dir, for discovery tests.

``importlib.metadata`` and stevedore find a ``*.dist-info`` directory on ``sys.path`` exactly as
they find an installed package, so these tests exercise real discovery, not a mock.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def make_dist(root: Path, name: str, version: str, modules: dict[str, str],
              entry_points: dict[str, dict[str, str]]) -> Path:
    """Write modules and a dist-info declaring entry points under ``root``; return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for mod, source in modules.items():
        path = root / (mod.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{k} = {v}" for k, v in eps.items())
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    (info / "RECORD").write_text("")
    return root
