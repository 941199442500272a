"""Rule: every JSON document the project parses is input, and hostile input is one clear error.

``json.loads`` raises ``RecursionError`` (not ``ValueError``) for a document nested deeper than
the interpreter's stack allows, e.g. ``"[" * 100_000``. A parser that only catches
``ValueError`` lets that escape as a traceback (a CLI command) or kills the thread that read
it (a broker's request handler, its metadata store loader). So every ``json.load(s)`` call in
``kafka_tiers`` must sit in a ``try`` whose handlers catch ``RecursionError`` (or a base of
it), unless it parses a string this process just produced itself (listed below with why).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kafka_tiers"

#: (path relative to the package, source of the JSON) parsed without the guard, and why
TRUSTED = {
    # the audit report this very command produced a line earlier (report.to_json())
    "cli/spark.py",
    # the conformance placer check: the child reads the job its parent wrote, the parent
    # reads the last line printed by that child's own code
    "conformance/placer/test_determinism.py",
}

_CATCHES = {"RecursionError", "RuntimeError", "Exception", "BaseException"}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:  # a bare ``except:``
        return {"BaseException"}
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _is_json_load(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"load", "loads"}
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "json")


def _round_trip(call: ast.Call) -> bool:
    """``json.loads(json.dumps(x))``: a deep copy of a value already in memory."""
    return bool(call.args) and isinstance(call.args[0], ast.Call) and \
        isinstance(call.args[0].func, ast.Attribute) and call.args[0].func.attr == "dumps"


def unguarded_json_parses(tree: ast.AST) -> list[int]:
    """Line numbers of ``json.load(s)`` calls not inside a ``try`` catching RecursionError."""
    bad: list[int] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if _is_json_load(node) and not guarded and not _round_trip(node):  # type: ignore[arg-type]
            bad.append(node.lineno)  # type: ignore[attr-defined]
        if isinstance(node, ast.Try | ast.TryStar):
            catches = any(_names(h.type) & _CATCHES for h in node.handlers)
            for child in node.body:
                visit(child, guarded or catches)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            guarded = False  # a function defined in a try runs outside it
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return bad


def test_every_json_parse_of_input_handles_a_too_deep_document() -> None:
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in TRUSTED:
            continue
        lines = unguarded_json_parses(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert found == {}, f"json.load(s) without a RecursionError handler: {found}"


def test_the_checker_sees_an_unguarded_parse() -> None:
    """The rule's own check must be able to fail."""
    src = ("import json\n"
           "def f(raw):\n"
           "    try:\n"
           "        return json.loads(raw)\n"
           "    except ValueError:\n"
           "        return None\n"
           "def g(raw):\n"
           "    try:\n"
           "        return json.loads(raw)\n"
           "    except (ValueError, RecursionError):\n"
           "        return None\n")
    assert unguarded_json_parses(ast.parse(src)) == [4]


def test_a_too_deep_document_is_a_recursion_error_not_a_value_error() -> None:
    """Why the rule exists: the standard parser's failure for nesting is not a ValueError."""
    with pytest.raises(RecursionError):
        json.loads("[" * 200_000)


DEEP = b"[" * 200_000


def test_hostile_documents_are_one_clear_error_where_the_project_reads_them(
        tmp_path: Path) -> None:
    from kafka_tiers.cluster.metadata_store import MetadataStoreError, decode
    from kafka_tiers.cluster.transport import FrameError, decode_request, decode_response
    from kafka_tiers.objectstore.manifest import ManifestError, SegmentManifest

    with pytest.raises(MetadataStoreError):
        decode(DEEP)
    header_req = b"\x00\x01\x00\x00\x00\x00\x00\x07" + len(DEEP).to_bytes(4, "big")
    with pytest.raises(FrameError):
        decode_request(header_req + DEEP)
    header_resp = b"\x00\x00\x00\x07\x00\x00" + len(DEEP).to_bytes(4, "big")
    with pytest.raises(FrameError):
        decode_response(header_resp + DEEP)
    with pytest.raises(FrameError):
        decode_response(b"\x00\x01")
    with pytest.raises(ManifestError):
        SegmentManifest.from_json(DEEP)
