"""Where the broker keeps ACLs for its authorizer: the document ``acls`` of the security state
store (:mod:`kafka_tiers.kafka.security.state_store`; a cluster's metadata store, embedded or
ZooKeeper, or a standalone broker's first log dir), as an
:class:`~kafka_tiers.api.authorizer.AclStorage`.

The document, grouped by resource pattern so a pattern's name is written once::

    {"serial": 7,
     "acls": {"TOPIC": {"LITERAL": {"orders": [["User:alice", "*", "READ", "ALLOW"]]},
                        "PREFIXED": {"orders-": [["User:*", "*", "WRITE", "DENY"]]}}}}

Names are Kafka's enum names (``READ``, ``ALLOW``, ``TOPIC``, ``PREFIXED``). ``serial`` grows
with every change; a watcher is handed each set once and never one older than it was already
given (deliveries from the store's watch and from this broker's own updates may cross).

Bounds: at most :data:`MAX_ACLS` ACLs (an update beyond is refused, nothing changed), and the
store's document size (``MAX_DOCUMENT_BYTES``, about 900 KiB: some 25,000 short ACLs), whichever
comes first; both refusals say how many ACLs to delete.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kafka_tiers.api.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclStorage,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafka_tiers.kafka.security.state_store import SecurityStateError, SecurityStateStore

log = logging.getLogger(__name__)

#: the state store document the ACLs are kept in
ACL_DOCUMENT = "acls"
#: the most ACLs stored (a CreateAcls beyond is refused)
MAX_ACLS = 100_000

AclsCallback = Callable[[list[AclBinding]], None]


def encode(bindings: Iterable[AclBinding], serial: int) -> dict[str, Any]:
    """The stored document of ``bindings`` (sorted, so equal sets encode equally)."""
    tree: dict[str, dict[str, dict[str, list[list[str]]]]] = {}
    for b in sorted(set(bindings), key=_order):
        p, e = b.pattern, b.entry
        tree.setdefault(p.resource_type.name, {}).setdefault(p.pattern_type.name, {}) \
            .setdefault(p.name, []).append([e.principal, e.host, e.operation.name,
                                            e.permission_type.name])
    return {"serial": serial, "acls": tree}


def decode(doc: Any) -> list[AclBinding]:
    """The ACLs of a stored document (None: none).

    Raises:
        SecurityStateError: not the document's shape, or an unknown enum name (the entry is
            named by its resource, never the whole document).
    """
    if doc is None:
        return []
    tree = doc.get("acls") if isinstance(doc, dict) else None
    if not isinstance(tree, dict):
        raise SecurityStateError("the stored ACL document has no \"acls\" object; restore it "
                                 "from a backup", ACL_DOCUMENT)
    found: list[AclBinding] = []
    try:
        for rtype, by_pattern in tree.items():
            for ptype, by_name in by_pattern.items():
                for name, entries in by_name.items():
                    pattern = ResourcePattern(ResourceType[rtype], str(name),
                                              PatternType[ptype])
                    for principal, host, op, perm in entries:
                        found.append(AclBinding(pattern, AccessControlEntry(
                            str(principal), str(host), AclOperation[op],
                            AclPermissionType[perm])))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SecurityStateError(f"the stored ACL document has an unreadable entry "
                                 f"({type(exc).__name__}: {str(exc)[:100]}); restore it "
                                 "from a backup", ACL_DOCUMENT) from None
    return found


def _order(b: AclBinding) -> tuple[Any, ...]:
    p, e = b.pattern, b.entry
    return (p.resource_type, p.pattern_type, p.name, e.principal, e.host, e.operation,
            e.permission_type)


def _serial(doc: Any) -> int:
    serial = doc.get("serial") if isinstance(doc, dict) else None
    return serial if isinstance(serial, int) else -1


class StateStoreAclStorage(AclStorage):
    """ACLs in the security state store's document ``acls`` (see the module docstring).

    Args:
        store: the broker's store (``state_store_of(server)``); not closed here.
        max_acls: the bound on stored ACLs.
    """

    def __init__(self, store: SecurityStateStore, *, max_acls: int = MAX_ACLS) -> None:
        self.store = store
        self.max_acls = max_acls
        self._lock = threading.Lock()
        self._callbacks: list[AclsCallback] = []
        self._delivered = -1  # the serial last handed to the callbacks
        self._watching = False

    def load(self) -> list[AclBinding]:
        """Every stored ACL.

        Raises:
            SecurityStateError: the store cannot be read or the document is unreadable.
        """
        doc, _ = self.store.read(ACL_DOCUMENT)
        return decode(doc)

    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()
               ) -> list[AclBinding]:
        """Add and remove ACLs in one compare-and-set (re-applied when another broker wrote
        meanwhile); the watchers get the new set before this returns.

        Raises:
            SecurityStateError: the store failed, the result would hold more than
                ``max_acls`` ACLs or exceed the document size (nothing changed then).
        """
        adding, removing = set(add), set(remove)

        def change(doc: Any) -> Any:
            current = set(decode(doc))
            new = (current - removing) | adding
            if new == current:
                return doc
            if len(new) > self.max_acls:
                raise SecurityStateError(
                    f"{len(new)} ACLs would be stored, above the limit of {self.max_acls}; "
                    f"delete at least {len(new) - self.max_acls} first", ACL_DOCUMENT)
            return encode(new, _serial(doc) + 1)

        new_doc = self.store.update(ACL_DOCUMENT, change)
        self._deliver(new_doc)
        return decode(new_doc)

    def watch(self, callback: AclsCallback) -> None:
        """Call ``callback(acls)`` now and after every change by any broker (never with a
        set older than one already delivered).

        Raises:
            SecurityStateError: the document cannot be read now.
        """
        with self._lock:
            self._callbacks.append(callback)
            first = not self._watching
            self._watching = True
        if first:
            self.load()  # an unreadable document fails the start, not a later callback
            self.store.watch(ACL_DOCUMENT, self._deliver)
        else:
            callback(self.load())

    def _deliver(self, doc: Any) -> None:
        acls = decode(doc)
        serial = _serial(doc)
        with self._lock:
            if doc is not None and serial <= self._delivered:
                return  # a set already delivered, or older: a crossing delivery
            self._delivered = serial
            for cb in list(self._callbacks):
                cb(acls)


__all__ = ["ACL_DOCUMENT", "MAX_ACLS", "StateStoreAclStorage", "decode", "encode"]
