"""Nothing outside the guard unwraps it: every plugin call goes through
``kafka_tiers/remote/guarded.py``.

The check reads the source of the core (``kafka_tiers/``), the first-party plugins
(``plugins/*/src``), the contrib distributions (``contrib/*/src``) and the benchmarks with
``ast``, and fails on:

- an attribute ``._plugin``, ``._call`` or ``.inner`` of anything but ``self``/``cls`` (the
  guard's wrapped plugin, its private call path, a wrapper's inner object);
- an attribute ``.plugin`` of an expression naming a storage, a guard or a manager
  (``storage.plugin``, ``self.rlm.storage.plugin``, ``guarded.plugin``);
- a ``getattr``/``hasattr`` probe for the guard's insides or for an optional storage operation
  (``getattr(storage, "plugin", storage)``, ``getattr(x, "collect_orphans", None)``): optional
  operations are guard methods (``GuardedRemoteStorage.supports`` asks). A probe for
  ``"plugin"`` counts only on a storage-like receiver (errors carry a ``plugin`` attribute).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "kafka_tiers" / "remote" / "guarded.py"

#: attributes nobody but the object itself touches
PRIVATE = {"_plugin", "_call", "inner"}
#: names probed with getattr to get around the guard
PROBED = {"plugin", "_plugin", "inner", "_call", "collect_orphans", "read_manifest",
          "object_store", "key_prefix", "list_topics", "list_partitions", "object_key"}
_STORAGE_LIKE = re.compile(r"storage|rsm|guard|manager", re.IGNORECASE)


def unwrapping(source: str, filename: str = "<source>") -> list[str]:
    """Every place in ``source`` that unwraps the guard, as ``file:line: what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute):
            receiver = ast.unparse(node.value)
            if node.attr in PRIVATE and receiver not in ("self", "cls"):
                found.append(f"{filename}:{node.lineno}: {receiver}.{node.attr}")
            elif node.attr == "plugin" and _STORAGE_LIKE.search(receiver):
                found.append(f"{filename}:{node.lineno}: {receiver}.plugin")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in PROBED):
            name = node.args[1].value
            if name == "plugin" and not _STORAGE_LIKE.search(ast.unparse(node.args[0])):
                continue  # an error's plugin attribute (err.plugin), not the guard's
            found.append(f"{filename}:{node.lineno}: {node.func.id}(..., {name!r})")
    return found


def _sources() -> list[Path]:
    roots = [ROOT / "kafka_tiers", ROOT / "benchmarks",
             *sorted((ROOT / "plugins").glob("*/src")), *sorted((ROOT / "contrib").glob("*/src"))]
    files = [p for root in roots for p in sorted(root.rglob("*.py"))]
    return [p for p in files if p.resolve() != GUARD.resolve()]


def test_no_module_outside_the_guard_unwraps_it() -> None:
    files = _sources()
    assert len(files) > 100  # the scan sees the tree (core, plugins, contrib, benchmarks)
    assert any("plugins" in p.parts for p in files) and any("contrib" in p.parts for p in files)
    found = [hit for path in files
             for hit in unwrapping(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "unwrapping the guard:\n" + "\n".join(found)


def test_the_check_catches_the_old_patterns() -> None:
    old_rlm = ('plugin = getattr(storage, "plugin", storage)\n'
               'collect = getattr(plugin, "collect_orphans", None)\n')
    assert len(unwrapping(old_rlm)) == 2
    old_cli = ('def f(rsm, md):\n'
               '    return getattr(getattr(rsm, "plugin", rsm), "read_manifest")(md)\n')
    assert len(unwrapping(old_cli)) == 2
    old_s3 = ('while hasattr(store, "inner"):\n'
              '    store = store.inner\n'
              'self.rlm.storage._call("op", None, fn)\n'
              'guarded._plugin.collect_orphans(0)\n')
    assert len(unwrapping(old_s3)) == 4
    assert unwrapping("self.storage.plugin.read_manifest(md)\n") == [
        "<source>:1: self.storage.plugin"]


def test_the_check_allows_what_is_not_unwrapping() -> None:
    allowed = ("self.inner.put(key, data)\n"
               "self._call(fn)\n"
               "raise PluginError(str(exc.plugin))\n"
               "name = getattr(err, 'plugin', None)\n"
               "guarded = guard(storage)\n"
               "if guarded.supports('collect_orphans'):\n"
               "    guarded.collect_orphans(0)\n")
    assert unwrapping(allowed) == []
