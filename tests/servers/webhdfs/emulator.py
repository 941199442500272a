"""A WebHDFS REST server EMULATOR for tests: it follows the public WebHDFS REST API spec
(hadoop.apache.org, "WebHDFS REST API"); it is NOT Hadoop and shares no code with it.

No Hadoop distribution can be installed on the project's machines, so the HDFS plugin's tests
run against this; the same tests run against a real cluster when ``KT_HDFS_URL`` is set (see
``docs/testing.md``). Standard library only.

What it does, as the spec and HDFS do:

- Two HTTP listeners on 127.0.0.1: a "namenode" port and a "datanode" port. ``CREATE`` (PUT),
  ``APPEND`` (POST) and ``OPEN`` (GET) on the namenode answer ``307 Temporary Redirect`` with a
  ``Location`` on the datanode port (carrying ``namenoderpcaddress`` and every parameter, as
  Hadoop's namenode does); the data goes to the datanode, which answers ``201 Created`` with
  ``Location: webhdfs://<host>:<port>/<path>`` (CREATE), ``200`` (APPEND) or ``200`` with
  the bytes (OPEN with ``offset``/``length``). ``noredirect=true`` answers ``200
  {"Location": ...}`` instead of the redirect. Request bodies may be chunked.
- ``GETFILESTATUS``, ``LISTSTATUS``, ``GETCONTENTSUMMARY``, ``GETHOMEDIRECTORY``, ``MKDIRS``,
  ``RENAME`` (HDFS's boolean rename: ``false`` for a missing source, an existing destination or
  a missing destination parent; an existing destination directory receives the source),
  ``DELETE`` (``recursive``; ``false`` for a missing path), ``SETPERMISSION``, ``SETOWNER``.
- Parameters ``overwrite``, ``permission`` (octal, 0..1777), ``replication``, ``blocksize``,
  ``buffersize``, ``offset``, ``length``, ``recursive``, ``destination``, ``owner``, ``group``,
  validated with Hadoop's messages (``Invalid value for webhdfs parameter "offset": ...``).
- Simple authentication: the user is ``user.name`` (default ``dr.who``, Hadoop's static web
  user). HDFS permissions are enforced like the namenode's permission checker: EXECUTE to
  traverse, WRITE on the nearest existing ancestor to create, WRITE on the parent to delete or
  rename (with the sticky bit), READ to open, READ_EXECUTE to list, WRITE to append, ALL on
  non-empty directories of a deleted subtree, ownership for SETPERMISSION/SETOWNER; the
  superuser (the user that "runs the namenode", ``--superuser``) and members of the supergroup
  bypass them. New inodes take the parent's group (BSD rule); defaults 644 / 755.
- Errors are ``{"RemoteException": {"exception", "javaClassName", "message"}}`` with the
  spec's status codes: 400 IllegalArgumentException / UnsupportedOperationException /
  InvalidPathException, 403 AccessControlException and every IOException
  (FileAlreadyExistsException, ParentNotDirectoryException, PathIsNotEmptyDirectoryException,
  AlreadyBeingCreatedException, EOFException), 404 FileNotFoundException, 500 otherwise.
- Single-writer leases: a file being written (CREATE or APPEND not finished) cannot be opened
  for writing by another request (AlreadyBeingCreatedException).

Storage is a real directory: ``<data-dir>/namespace/<path>`` holds the files and directories,
``<data-dir>/fsimage.json`` the inode attributes (owner, group, permission, replication, block
size, times, file id). Both survive a restart of the process.

Not emulated: Kerberos/delegation tokens, ``doas``, ACLs, xattrs, snapshots, symlinks,
quotas, checksums, storage policies, erasure coding, ``CONCAT``/``TRUNCATE``, block placement
(``replication`` and ``blocksize`` are recorded and reported, not acted on); such operations
answer 400 UnsupportedOperationException.

Run: ``python -m tests.servers.webhdfs --port P --data-port D --data-dir DIR``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

PREFIX = "/webhdfs/v1"
READ, WRITE, EXECUTE = 4, 2, 1
ACTION_NAMES = {
    0: "NONE", 1: "EXECUTE", 2: "WRITE", 3: "WRITE_EXECUTE", 4: "READ", 5: "READ_EXECUTE",
    6: "READ_WRITE", 7: "ALL",
}
DEFAULT_WEB_USER = "dr.who"
CLIENT_MACHINE = "127.0.0.1"
CHUNK = 64 * 1024


# ----------------------------------------------------------------------------------------------
# Errors, as Hadoop's ExceptionHandler maps them
# ----------------------------------------------------------------------------------------------
class RemoteError(Exception):
    """An error answered as a RemoteException JSON body with the spec's status code."""

    def __init__(self, exception: str, java_class: str, status: int, message: str):
        super().__init__(message)
        self.exception = exception
        self.java_class = java_class
        self.status = status
        self.message = message

    def body(self) -> dict[str, Any]:
        """The ``{"RemoteException": ...}`` JSON body."""
        return {"RemoteException": {"exception": self.exception,
                                    "javaClassName": self.java_class,
                                    "message": self.message}}


def file_not_found(message: str) -> RemoteError:
    """404 java.io.FileNotFoundException."""
    return RemoteError("FileNotFoundException", "java.io.FileNotFoundException", 404, message)


def access_denied(message: str) -> RemoteError:
    """403 org.apache.hadoop.security.AccessControlException."""
    return RemoteError("AccessControlException",
                       "org.apache.hadoop.security.AccessControlException", 403, message)


def already_exists(message: str) -> RemoteError:
    """403 org.apache.hadoop.fs.FileAlreadyExistsException."""
    return RemoteError("FileAlreadyExistsException",
                       "org.apache.hadoop.fs.FileAlreadyExistsException", 403, message)


def parent_not_directory(message: str) -> RemoteError:
    """403 org.apache.hadoop.fs.ParentNotDirectoryException."""
    return RemoteError("ParentNotDirectoryException",
                       "org.apache.hadoop.fs.ParentNotDirectoryException", 403, message)


def not_empty(message: str) -> RemoteError:
    """403 org.apache.hadoop.fs.PathIsNotEmptyDirectoryException."""
    return RemoteError("PathIsNotEmptyDirectoryException",
                       "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", 403, message)


def lease_conflict(message: str) -> RemoteError:
    """403 org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException."""
    return RemoteError("AlreadyBeingCreatedException",
                       "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException", 403,
                       message)


def io_error(message: str) -> RemoteError:
    """403 java.io.IOException (every IOException is 403 in WebHDFS)."""
    return RemoteError("IOException", "java.io.IOException", 403, message)


def illegal_argument(message: str) -> RemoteError:
    """400 java.lang.IllegalArgumentException."""
    return RemoteError("IllegalArgumentException", "java.lang.IllegalArgumentException", 400,
                       message)


def unsupported(message: str) -> RemoteError:
    """400 java.lang.UnsupportedOperationException."""
    return RemoteError("UnsupportedOperationException",
                       "java.lang.UnsupportedOperationException", 400, message)


def invalid_path(path: str) -> RemoteError:
    """400 org.apache.hadoop.fs.InvalidPathException."""
    return RemoteError("InvalidPathException", "org.apache.hadoop.fs.InvalidPathException", 400,
                       f"Invalid path name Invalid file name: {path}")


# ----------------------------------------------------------------------------------------------
# Parameters (the spec's "HTTP Query Parameter Dictionary")
# ----------------------------------------------------------------------------------------------
def _bad_param(name: str, detail: str) -> RemoteError:
    return illegal_argument(f'Invalid value for webhdfs parameter "{name}": {detail}')


def param_long(params: dict[str, str], name: str, default: int | None, minimum: int,
               maximum: int = 2**63 - 1) -> int | None:
    """A decimal integer parameter within [minimum, maximum], or ``default`` when absent."""
    raw = params.get(name)
    if raw is None or raw == "" or raw.lower() == "null":
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise _bad_param(name, f'For input string: "{raw}"') from None
    if value < minimum:
        raise _bad_param(name, f"Invalid parameter range: {name} = {value} < {minimum}")
    if value > maximum:
        raise _bad_param(name, f"Invalid parameter range: {name} = {value} > {maximum}")
    return value


def param_bool(params: dict[str, str], name: str, default: bool) -> bool:
    """A ``true``/``false`` parameter (case-insensitive)."""
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise _bad_param(name, f'Failed to parse "{raw}" to Boolean.')


def param_permission(params: dict[str, str], default: int) -> int:
    """The octal ``permission`` parameter (0..1777)."""
    raw = params.get("permission")
    if raw is None or raw == "" or raw.lower() == "null":
        return default
    try:
        value = int(raw, 8)
    except ValueError:
        raise _bad_param("permission", f'For input string: "{raw}" under radix 8') from None
    if not 0 <= value <= 0o1777:
        raise _bad_param("permission",
                         f"Invalid parameter range: permission = {raw} > 1777")
    return value


def normalize_path(raw: str) -> str:
    """An absolute, normalized HDFS path; ``.``/``..`` and ``:`` in names are refused (400)."""
    if not raw.startswith("/"):
        raise invalid_path(raw)
    parts = [p for p in raw.split("/") if p]
    for part in parts:
        if part in (".", "..") or ":" in part or "\x00" in part:
            raise invalid_path(raw)
    return "/" + "/".join(parts)


def parent_of(path: str) -> str:
    """The parent of an absolute normalized path (``/`` for top-level entries)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name_of(path: str) -> str:
    """The last component of a path (empty for the root)."""
    return path.rsplit("/", 1)[1] if path != "/" else ""


def child_path(parent: str, name: str) -> str:
    """``parent/name``."""
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def mode_string(is_dir: bool, perm: int) -> str:
    """``drwxr-xr-t`` style, as Hadoop's FsPermission prints it."""
    chars = []
    for shift in (6, 3, 0):
        bits = (perm >> shift) & 7
        chars += ["r" if bits & 4 else "-", "w" if bits & 2 else "-", "x" if bits & 1 else "-"]
    if perm & 0o1000:
        chars[8] = "t" if chars[8] == "x" else "T"
    return ("d" if is_dir else "-") + "".join(chars)


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------------------------
# The namespace
# ----------------------------------------------------------------------------------------------
class Namespace:
    """Files in a real directory plus their HDFS attributes in ``fsimage.json``.

    Every method takes the calling user and enforces HDFS permissions. One lock guards the
    metadata; file contents are streamed outside it (a file being written is held by a lease).
    """

    def __init__(self, data_dir: Path, *, superuser: str = "hdfs",
                 supergroup: str = "supergroup", user_groups: dict[str, set[str]] | None = None,
                 default_replication: int = 3, default_block_size: int = 134217728,
                 min_block_size: int = 1048576, max_replication: int = 512):
        self.data_dir = data_dir
        self.root = data_dir / "namespace"
        self.image = data_dir / "fsimage.json"
        self.superuser = superuser
        self.supergroup = supergroup
        self.user_groups = user_groups or {}
        self.default_replication = default_replication
        self.default_block_size = default_block_size
        self.min_block_size = min_block_size
        self.max_replication = max_replication
        self.lock = threading.RLock()
        self.meta: dict[str, dict[str, Any]] = {}
        self.next_file_id = 16386
        self.leases: dict[int, str] = {}  # file id -> holder
        self._load()

    # -- persistence -----------------------------------------------------------------------
    def _load(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.image.exists():
            image = json.loads(self.image.read_text())
            self.meta = image["inodes"]
            self.next_file_id = image["next_file_id"]
        if "/" not in self.meta:
            self.meta["/"] = self._new_inode(True, self.superuser, self.supergroup, 0o755,
                                             file_id=16385)
        # reconcile with the directory: files put there by hand get default attributes,
        # attributes of vanished files are dropped
        seen = {"/"}
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            base = "/" if rel == "." else "/" + rel
            for name, is_dir in [(d, True) for d in dirnames] + [(f, False) for f in filenames]:
                path = child_path(base, name)
                seen.add(path)
                if path not in self.meta or self.meta[path]["dir"] != is_dir:
                    self.meta[path] = self._new_inode(is_dir, self.superuser, self.supergroup,
                                                      0o755 if is_dir else 0o644)
        for path in list(self.meta):
            if path not in seen:
                del self.meta[path]
        self._save()

    def _save(self) -> None:
        tmp = self.image.with_suffix(".tmp")
        tmp.write_text(json.dumps({"next_file_id": self.next_file_id, "inodes": self.meta}))
        os.replace(tmp, self.image)

    def _new_inode(self, is_dir: bool, owner: str, group: str, perm: int, *,
                   replication: int = 0, block_size: int = 0,
                   file_id: int | None = None) -> dict[str, Any]:
        if file_id is None:
            file_id = self.next_file_id
            self.next_file_id += 1
        ts = now_ms()
        return {"dir": is_dir, "owner": owner, "group": group, "perm": perm,
                "replication": 0 if is_dir else replication,
                "blockSize": 0 if is_dir else block_size,
                "mtime": ts, "atime": 0 if is_dir else ts, "fileId": file_id}

    def local(self, path: str) -> Path:
        """Where ``path`` lives on the local disk."""
        return self.root / path.lstrip("/") if path != "/" else self.root

    # -- users and permissions ---------------------------------------------------------------
    def groups(self, user: str) -> set[str]:
        """The user's groups (``--user-groups``; the superuser is in the supergroup)."""
        groups = set(self.user_groups.get(user, set()))
        if user == self.superuser:
            groups.add(self.supergroup)
        return groups

    def is_superuser(self, user: str) -> bool:
        """The superuser and members of the supergroup bypass permission checks."""
        return user == self.superuser or self.supergroup in self.groups(user)

    def _inode_desc(self, path: str) -> str:
        m = self.meta[path]
        return f'"{path}":{m["owner"]}:{m["group"]}:{mode_string(m["dir"], m["perm"])}'

    def _check_one(self, user: str, path: str, want: int) -> None:
        m = self.meta[path]
        perm = m["perm"]
        if user == m["owner"]:
            bits = (perm >> 6) & 7
        elif m["group"] in self.groups(user):
            bits = (perm >> 3) & 7
        else:
            bits = perm & 7
        if bits & want != want:
            raise access_denied(
                f"Permission denied: user={user}, access={ACTION_NAMES[want]}, "
                f"inode={self._inode_desc(path)}"
            )

    def _chain(self, path: str) -> list[str | None]:
        """The inodes along ``path`` from the root: their paths, ``None`` where missing."""
        chain: list[str | None] = ["/"]
        current = "/"
        missing = False
        for name in [p for p in path.split("/") if p]:
            nxt = child_path(current, name)
            if missing or nxt not in self.meta:
                missing = True
                chain.append(None)
            else:
                chain.append(nxt)
            current = nxt
        return chain

    def check(self, user: str, path: str, *, ancestor: int | None = None,
              parent: int | None = None, access: int | None = None, sub: int | None = None,
              owner: bool = False, ignore_empty_dir: bool = False) -> None:
        """HDFS's permission check: traverse, then the optional ancestor / parent / path /
        subtree / ownership checks (the superuser bypasses all of them)."""
        if self.is_superuser(user):
            return
        chain = self._chain(path)
        ancestor_index = len(chain) - 2
        while ancestor_index >= 0 and chain[ancestor_index] is None:
            ancestor_index -= 1
        for i in range(ancestor_index + 1):
            inode = chain[i]
            assert inode is not None
            if not self.meta[inode]["dir"]:
                raise parent_not_directory(f"{inode} (is not a directory)")
            self._check_one(user, inode, EXECUTE)
        last = chain[-1]
        if parent is not None and parent & WRITE and len(chain) > 1 and last is not None:
            self._check_sticky(user, chain[-2], last)
        if ancestor is not None and len(chain) > 1 and ancestor_index >= 0:
            inode = chain[ancestor_index]
            assert inode is not None
            self._check_one(user, inode, ancestor)
        if parent is not None and len(chain) > 1 and chain[-2] is not None:
            self._check_one(user, chain[-2], parent)
        if access is not None and last is not None:
            self._check_one(user, last, access)
        if sub is not None and last is not None and self.meta[last]["dir"]:
            for sub_dir in self._subtree(last):
                if self.meta[sub_dir]["dir"]:
                    if ignore_empty_dir and not self._children(sub_dir):
                        continue
                    self._check_one(user, sub_dir, sub)
        if owner and last is not None and self.meta[last]["owner"] != user:
            raise access_denied(f"Permission denied. user={user} is not the owner of "
                                f"inode={last}")

    def _check_sticky(self, user: str, parent: str | None, child: str) -> None:
        if parent is None:
            return
        pm = self.meta[parent]
        if not pm["perm"] & 0o1000:
            return
        if user in (pm["owner"], self.meta[child]["owner"]):
            return
        raise access_denied(
            f"Permission denied by sticky bit: user={user}, path={self._inode_desc(child)}, "
            f"parent={self._inode_desc(parent)}"
        )

    # -- tree helpers ------------------------------------------------------------------------
    def _children(self, path: str) -> list[str]:
        prefix = "/" if path == "/" else path + "/"
        return sorted(p for p in self.meta
                      if p != "/" and p.startswith(prefix) and "/" not in p[len(prefix):])

    def _subtree(self, path: str) -> list[str]:
        prefix = "/" if path == "/" else path + "/"
        return [path, *sorted(p for p in self.meta if p != "/" and p.startswith(prefix))]

    def _touch(self, path: str) -> None:
        if path in self.meta:
            self.meta[path]["mtime"] = now_ms()

    def _length(self, path: str) -> int:
        try:
            return self.local(path).stat().st_size
        except OSError:
            return 0

    def status(self, path: str, suffix: str = "") -> dict[str, Any]:
        """The spec's FileStatus JSON object of an existing inode."""
        m = self.meta[path]
        return {
            "accessTime": m["atime"],
            "blockSize": m["blockSize"],
            "childrenNum": len(self._children(path)) if m["dir"] else 0,
            "fileId": m["fileId"],
            "group": m["group"],
            "length": 0 if m["dir"] else self._length(path),
            "modificationTime": m["mtime"],
            "owner": m["owner"],
            "pathSuffix": suffix,
            "permission": format(m["perm"], "o"),
            "replication": m["replication"],
            "storagePolicy": 0,
            "type": "DIRECTORY" if m["dir"] else "FILE",
        }

    def _ensure_parent_dirs(self, user: str, path: str, perm: int) -> None:
        """Create the missing ancestors of ``path`` (owner ``user``, parent's group)."""
        current = "/"
        for name in [p for p in parent_of(path).split("/") if p]:
            nxt = child_path(current, name)
            if nxt not in self.meta:
                group = self.meta[current]["group"]
                self.local(nxt).mkdir()
                self.meta[nxt] = self._new_inode(True, user, group, perm)
                self._touch(current)
            elif not self.meta[nxt]["dir"]:
                raise parent_not_directory(f"{nxt} (is not a directory)")
            current = nxt

    # -- read operations ---------------------------------------------------------------------
    def get_file_status(self, user: str, path: str) -> dict[str, Any]:
        """GETFILESTATUS."""
        with self.lock:
            self.check(user, path)
            if path not in self.meta:
                raise file_not_found(f"File does not exist: {path}")
            return {"FileStatus": self.status(path)}

    def list_status(self, user: str, path: str) -> dict[str, Any]:
        """LISTSTATUS (a file lists itself with an empty pathSuffix)."""
        with self.lock:
            if path in self.meta and self.meta[path]["dir"]:
                self.check(user, path, access=READ | EXECUTE)
            else:
                self.check(user, path)
            if path not in self.meta:
                raise file_not_found(f"File {path} does not exist.")
            if not self.meta[path]["dir"]:
                statuses = [self.status(path)]
            else:
                statuses = [self.status(c, name_of(c)) for c in self._children(path)]
            return {"FileStatuses": {"FileStatus": statuses}}

    def content_summary(self, user: str, path: str) -> dict[str, Any]:
        """GETCONTENTSUMMARY."""
        with self.lock:
            self.check(user, path, sub=READ | EXECUTE)
            if path not in self.meta:
                raise file_not_found(f"File does not exist: {path}")
            dirs = files = length = consumed = 0
            for p in self._subtree(path):
                if self.meta[p]["dir"]:
                    dirs += 1
                else:
                    files += 1
                    size = self._length(p)
                    length += size
                    consumed += size * self.meta[p]["replication"]
            return {"ContentSummary": {"directoryCount": dirs, "fileCount": files,
                                       "length": length, "quota": -1,
                                       "spaceConsumed": consumed, "spaceQuota": -1}}

    def check_open(self, user: str, path: str) -> int:
        """The namenode half of OPEN: the file must exist; returns its length."""
        with self.lock:
            self.check(user, path)
            if path not in self.meta:
                raise file_not_found(f"File {path} not found.")
            return self._length(path)

    def open_range(self, user: str, path: str, offset: int,
                   length: int | None) -> tuple[Path, int, int]:
        """The datanode half of OPEN: (local file, start, count)."""
        with self.lock:
            self.check(user, path, access=READ)
            if path not in self.meta:
                raise file_not_found(f"File does not exist: {path}")
            if self.meta[path]["dir"]:
                raise file_not_found(f"Path is not a file: {path}")
            size = self._length(path)
            if offset > size:
                raise RemoteError("EOFException", "java.io.EOFException", 403,
                                  "Cannot seek after EOF")
            count = size - offset if length is None else min(length, size - offset)
            return self.local(path), offset, count

    # -- write operations --------------------------------------------------------------------
    def mkdirs(self, user: str, path: str, perm: int) -> dict[str, Any]:
        """MKDIRS (``true`` also when the directory exists)."""
        with self.lock:
            if path in self.meta:
                self.check(user, path)
                if not self.meta[path]["dir"]:
                    raise already_exists(f"Path is not a directory: {path}")
                return {"boolean": True}
            self.check(user, path, ancestor=WRITE)
            self._ensure_parent_dirs(user, path, perm | 0o300)
            parent = parent_of(path)
            self.local(path).mkdir()
            self.meta[path] = self._new_inode(True, user, self.meta[parent]["group"], perm)
            self._touch(parent)
            self._save()
            return {"boolean": True}

    def _validate_block_params(self, path: str, replication: int, block_size: int) -> None:
        if replication > self.max_replication:
            raise io_error(f"Requested replication factor of {replication} exceeds maximum of "
                           f"{self.max_replication} for {path} from {CLIENT_MACHINE}")
        if block_size < self.min_block_size:
            raise io_error("Specified block size is less than configured minimum value "
                           f"(dfs.namenode.fs-limits.min-block-size): {block_size} < "
                           f"{self.min_block_size}")
        if block_size % 512:
            raise illegal_argument(f"io.bytes.per.checksum(512) and blockSize({block_size}) do "
                                   "not match. blockSize should be a multiple of "
                                   "io.bytes.per.checksum")

    def _lease_holder(self, path: str) -> str | None:
        return self.leases.get(self.meta[path]["fileId"]) if path in self.meta else None

    def begin_create(self, user: str, path: str, *, overwrite: bool, perm: int,
                     replication: int | None, block_size: int | None,
                     holder: str) -> tuple[Path, int]:
        """The datanode half of CREATE: checks, then an empty file under ``holder``'s lease."""
        replication = replication or self.default_replication
        block_size = block_size or self.default_block_size
        with self.lock:
            if path == "/":
                raise already_exists("/ already exists as a directory")
            exists = path in self.meta
            if exists and self.meta[path]["dir"]:
                raise already_exists(f"{path} already exists as a directory")
            self.check(user, path, ancestor=WRITE, access=WRITE if overwrite and exists else None)
            self._validate_block_params(path, replication, block_size)
            current = self._lease_holder(path)
            if exists and current is not None:
                raise lease_conflict(
                    f"Failed to CREATE_FILE {path} for {holder} on {CLIENT_MACHINE} because "
                    f"this file lease is currently owned by {current} on {CLIENT_MACHINE}")
            if exists and not overwrite:
                raise already_exists(f"{path} for client {CLIENT_MACHINE} already exists")
            self._ensure_parent_dirs(user, path, 0o755 | 0o300)
            parent = parent_of(path)
            local = self.local(path)
            with local.open("wb"):
                pass
            self.meta[path] = self._new_inode(False, user, self.meta[parent]["group"], perm,
                                              replication=replication, block_size=block_size)
            self._touch(parent)
            file_id = self.meta[path]["fileId"]
            self.leases[file_id] = holder
            self._save()
            return local, file_id

    def check_append(self, user: str, path: str) -> None:
        """The namenode half of APPEND: the file must exist."""
        with self.lock:
            self.check(user, path)
            if path not in self.meta:
                raise file_not_found(f"File {path} not found.")

    def begin_append(self, user: str, path: str, holder: str) -> tuple[Path, int]:
        """The datanode half of APPEND: checks, then ``holder``'s lease on the file."""
        with self.lock:
            if path in self.meta and self.meta[path]["dir"]:
                raise already_exists(f"Cannot append to directory {path}; already exists as a "
                                     "directory.")
            self.check(user, path, access=WRITE)
            if path not in self.meta:
                raise file_not_found(f"Failed to append to non-existent file {path} for client "
                                     f"{CLIENT_MACHINE}")
            current = self._lease_holder(path)
            if current is not None:
                raise lease_conflict(
                    f"Failed to APPEND_FILE {path} for {holder} on {CLIENT_MACHINE} because "
                    f"this file lease is currently owned by {current} on {CLIENT_MACHINE}")
            file_id = self.meta[path]["fileId"]
            self.leases[file_id] = holder
            return self.local(path), file_id

    def finish_write(self, file_id: int) -> None:
        """Release the lease of a CREATE/APPEND and stamp the file's modification time."""
        with self.lock:
            self.leases.pop(file_id, None)
            for m in self.meta.values():
                if m["fileId"] == file_id:
                    m["mtime"] = now_ms()
                    break
            self._save()

    def rename(self, user: str, src: str, dst: str) -> dict[str, Any]:
        """RENAME with HDFS's boolean semantics (see the module docstring)."""
        with self.lock:
            if dst in self.meta and self.meta[dst]["dir"] and src != dst:
                dst = child_path(dst, name_of(src))
            self.check(user, src, parent=WRITE)
            self.check(user, dst, ancestor=WRITE)
            if src not in self.meta or src == "/":
                return {"boolean": False}
            if src == dst:
                return {"boolean": True}
            if dst.startswith(src + "/"):
                raise io_error(f"Rename destination {dst} is a directory or file under source "
                               f"{src}")
            dst_parent = parent_of(dst)
            if dst in self.meta or dst_parent not in self.meta or \
                    not self.meta[dst_parent]["dir"]:
                return {"boolean": False}
            os.rename(self.local(src), self.local(dst))
            for p in self._subtree(src):
                self.meta[dst + p[len(src):]] = self.meta.pop(p)
            self._touch(parent_of(src))
            self._touch(dst_parent)
            self._save()
            return {"boolean": True}

    def delete(self, user: str, path: str, recursive: bool) -> dict[str, Any]:
        """DELETE (``false`` for a missing path or the root)."""
        with self.lock:
            self.check(user, path)
            if not recursive and path in self.meta and self.meta[path]["dir"] and \
                    self._children(path):
                raise not_empty(f"`{path} is non empty': Directory is not empty")
            self.check(user, path, parent=WRITE, sub=READ | WRITE | EXECUTE,
                       ignore_empty_dir=True)
            if path not in self.meta or path == "/":
                return {"boolean": False}
            local = self.local(path)
            if self.meta[path]["dir"]:
                shutil.rmtree(local)
            else:
                local.unlink()
            for p in self._subtree(path):
                self.leases.pop(self.meta[p]["fileId"], None)
                del self.meta[p]
            self._touch(parent_of(path))
            self._save()
            return {"boolean": True}

    def set_permission(self, user: str, path: str, perm: int) -> None:
        """SETPERMISSION (owner or superuser)."""
        with self.lock:
            self.check(user, path, owner=True)
            if path not in self.meta:
                raise file_not_found(f"File does not exist: {path}")
            self.meta[path]["perm"] = perm
            self._save()

    def set_owner(self, user: str, path: str, owner: str | None, group: str | None) -> None:
        """SETOWNER (the owner may only be changed by the superuser)."""
        if not owner and not group:
            raise illegal_argument("Both owner and group are empty.")
        with self.lock:
            self.check(user, path, owner=True)
            if path not in self.meta:
                raise file_not_found(f"File does not exist: {path}")
            if not self.is_superuser(user):
                if owner and owner != user:
                    raise access_denied(f"User {user} is not a super user (non-super user "
                                        "cannot change owner).")
                if group and group not in self.groups(user):
                    raise access_denied(f"User {user} does not belong to {group}")
            if owner:
                self.meta[path]["owner"] = owner
            if group:
                self.meta[path]["group"] = group
            self._save()

    def initial_dir(self, path: str, owner: str, perm: int) -> None:
        """Create ``path`` (and its parents, as the superuser) if missing, owned by ``owner``."""
        with self.lock:
            path = normalize_path(path)
            if path in self.meta:
                return
            self._ensure_parent_dirs(self.superuser, path, 0o755)
            self.local(path).mkdir()
            self.meta[path] = self._new_inode(True, owner, self.meta[parent_of(path)]["group"],
                                              perm)
            self._save()


# ----------------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------------
GET_OPS = {"OPEN", "GETFILESTATUS", "LISTSTATUS", "GETCONTENTSUMMARY", "GETHOMEDIRECTORY",
           "GETFILECHECKSUM", "GETDELEGATIONTOKEN", "GETXATTRS", "LISTXATTRS", "CHECKACCESS",
           "GETACLSTATUS", "GETTRASHROOT", "GETSTORAGEPOLICY", "LISTSTATUS_BATCH",
           "GETSNAPSHOTDIFF", "GETSERVERDEFAULTS", "GETALLSTORAGEPOLICY", "GETQUOTAUSAGE",
           "GETFILEBLOCKLOCATIONS", "GETSTATUS", "GETECPOLICY", "GETSNAPSHOTTABLEDIRECTORYLIST"}
PUT_OPS = {"CREATE", "MKDIRS", "RENAME", "SETPERMISSION", "SETOWNER", "CREATESYMLINK",
           "SETREPLICATION", "SETTIMES", "RENEWDELEGATIONTOKEN", "CANCELDELEGATIONTOKEN",
           "CREATESNAPSHOT", "RENAMESNAPSHOT", "SETXATTR", "REMOVEXATTR", "MODIFYACLENTRIES",
           "REMOVEACLENTRIES", "REMOVEDEFAULTACL", "REMOVEACL", "SETACL", "SETSTORAGEPOLICY",
           "SETQUOTA", "SETQUOTABYSTORAGETYPE", "ALLOWSNAPSHOT", "DISALLOWSNAPSHOT",
           "ENABLEECPOLICY", "DISABLEECPOLICY", "SETECPOLICY", "SATISFYSTORAGEPOLICY"}
POST_OPS = {"APPEND", "CONCAT", "TRUNCATE", "UNSETSTORAGEPOLICY", "UNSETECPOLICY"}
DELETE_OPS = {"DELETE", "DELETESNAPSHOT"}
OPS_BY_METHOD = {"GET": ("GetOpParam", GET_OPS), "PUT": ("PutOpParam", PUT_OPS),
                 "POST": ("PostOpParam", POST_OPS), "DELETE": ("DeleteOpParam", DELETE_OPS)}
SUPPORTED = {"OPEN", "GETFILESTATUS", "LISTSTATUS", "GETCONTENTSUMMARY", "GETHOMEDIRECTORY",
             "CREATE", "MKDIRS", "RENAME", "SETPERMISSION", "SETOWNER", "APPEND", "DELETE"}


class Emulator:
    """The two listeners (namenode, datanode) over one :class:`Namespace`."""

    def __init__(self, namespace: Namespace, host: str = "127.0.0.1", port: int = 0,
                 data_port: int = 0):
        self.namespace = namespace
        self.host = host
        self.namenode = ThreadingHTTPServer((host, port), _handler(self, "namenode"))
        self.datanode = ThreadingHTTPServer((host, data_port), _handler(self, "datanode"))
        self.namenode.daemon_threads = True
        self.datanode.daemon_threads = True
        self._threads: list[threading.Thread] = []
        self._clients = 0
        self._clients_lock = threading.Lock()

    @property
    def port(self) -> int:
        """The namenode's port."""
        return int(self.namenode.server_address[1])

    @property
    def data_port(self) -> int:
        """The datanode's port."""
        return int(self.datanode.server_address[1])

    def new_client_name(self) -> str:
        """A DFSClient-style lease holder name."""
        with self._clients_lock:
            self._clients += 1
            return f"DFSClient_NONMAPREDUCE_{self._clients}_{os.getpid()}"

    def start(self) -> None:
        """Serve both listeners in background threads."""
        for server in (self.namenode, self.datanode):
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop serving and close both sockets."""
        for server in (self.namenode, self.datanode):
            server.shutdown()
            server.server_close()


def _handler(emulator: Emulator, role: str) -> type[BaseHTTPRequestHandler]:
    class Handler(_WebHdfsHandler):
        pass

    Handler.emulator = emulator
    Handler.role = role
    return Handler


class _WebHdfsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY every answer with a body
    # waits ~45 ms for the client's delayed ACK (Nagle), which a real namenode does not.
    disable_nagle_algorithm = True
    server_version = "kt-webhdfs-emulator/1"
    emulator: Emulator
    role: str

    # -- plumbing ----------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.role} {self.address_string()} {format % args}\n")

    def _send(self, status: int, body: bytes = b"", content_type: str | None = None,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _send_json(self, obj: dict[str, Any], status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _body_expected(self) -> bool:
        return bool(self.headers.get("Content-Length", "0") != "0"
                    or "chunked" in self.headers.get("Transfer-Encoding", "").lower())

    def _body(self) -> Iterator[bytes]:
        """The request body, de-chunked, in pieces."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("truncated chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                remaining = size
                while remaining:
                    piece = self.rfile.read(min(remaining, CHUNK))
                    if not piece:
                        raise ConnectionError("truncated chunk")
                    remaining -= len(piece)
                    yield piece
                self.rfile.readline(3)
        else:
            remaining = int(self.headers.get("Content-Length") or 0)
            while remaining:
                piece = self.rfile.read(min(remaining, CHUNK))
                if not piece:
                    raise ConnectionError("truncated body")
                remaining -= len(piece)
                yield piece

    def _discard_body(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return
        for _ in self._body():
            pass

    def _error(self, err: RemoteError, body_pending: bool) -> None:
        if body_pending and self._body_expected():
            self.close_connection = True
        self._send_json(err.body(), err.status)

    # -- dispatch ----------------------------------------------------------------------------
    def do_GET(self) -> None:
        """GET requests."""
        self._dispatch("GET")

    def do_PUT(self) -> None:
        """PUT requests."""
        self._dispatch("PUT")

    def do_POST(self) -> None:
        """POST requests."""
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        """DELETE requests."""
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        if not url.path.startswith(PREFIX + "/") and url.path != PREFIX:
            if self._body_expected():
                self.close_connection = True
            self._send(404, b"Not Found: only /webhdfs/v1/<path> is served\n", "text/plain")
            return
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        body_consumed = False
        try:
            path = normalize_path(unquote(url.path[len(PREFIX):]) or "/")
            op_class, ops = OPS_BY_METHOD[method]
            op = params.get("op", "").upper()
            if op not in ops:
                raise _bad_param("op", "No enum constant org.apache.hadoop.hdfs.web.resources."
                                       f"{op_class}.Op.{op or 'NULL'}")
            if op not in SUPPORTED:
                raise unsupported(f"op={op} is not supported by the kafka-tiers WebHDFS "
                                  "emulator")
            user = params.get("user.name") or DEFAULT_WEB_USER
            if self.role == "datanode":
                if op not in ("CREATE", "APPEND", "OPEN"):
                    raise illegal_argument(f"Invalid operation {op}")
                if not params.get("namenoderpcaddress"):
                    raise illegal_argument("namenoderpcaddress is not specified.")
                body_consumed = True
                getattr(self, f"_dn_{op.lower()}")(user, path, params)
            else:
                if op not in ("CREATE", "APPEND"):
                    self._discard_body()
                    body_consumed = True
                getattr(self, f"_nn_{op.lower()}")(user, path, params)
        except RemoteError as err:
            self._error(err, not body_consumed)
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True
        except Exception as exc:  # an emulator bug: answer 500 like Hadoop's RuntimeException
            err = RemoteError("RuntimeException", "java.lang.RuntimeException", 500,
                              f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(Exception):
                self._error(err, True)

    # -- namenode ----------------------------------------------------------------------------
    def _redirect(self, op: str, path: str, params: dict[str, str]) -> None:
        self._discard_body()
        query = dict(params)
        query["op"] = op
        query["namenoderpcaddress"] = f"{self.emulator.host}:{self.emulator.port}"
        query.pop("noredirect", None)
        location = (f"http://{self.emulator.host}:{self.emulator.data_port}{PREFIX}"
                    f"{quote(path)}?{urlencode(query)}")
        if param_bool(params, "noredirect", False):
            self._send_json({"Location": location})
        else:
            self._send(307, headers={"Location": location},
                       content_type="application/octet-stream")

    def _nn_create(self, user: str, path: str, params: dict[str, str]) -> None:
        self._validate_create_params(params)
        self._redirect("CREATE", path, params)

    def _nn_append(self, user: str, path: str, params: dict[str, str]) -> None:
        param_long(params, "buffersize", None, 1, 2**31 - 1)
        self.emulator.namespace.check_append(user, path)
        self._redirect("APPEND", path, params)

    def _nn_open(self, user: str, path: str, params: dict[str, str]) -> None:
        param_long(params, "offset", 0, 0)
        param_long(params, "length", None, 0)
        param_long(params, "buffersize", None, 1, 2**31 - 1)
        self.emulator.namespace.check_open(user, path)
        self._redirect("OPEN", path, params)

    def _nn_getfilestatus(self, user: str, path: str, params: dict[str, str]) -> None:
        self._send_json(self.emulator.namespace.get_file_status(user, path))

    def _nn_liststatus(self, user: str, path: str, params: dict[str, str]) -> None:
        self._send_json(self.emulator.namespace.list_status(user, path))

    def _nn_getcontentsummary(self, user: str, path: str, params: dict[str, str]) -> None:
        self._send_json(self.emulator.namespace.content_summary(user, path))

    def _nn_gethomedirectory(self, user: str, path: str, params: dict[str, str]) -> None:
        self._send_json({"Path": f"/user/{user}"})

    def _nn_mkdirs(self, user: str, path: str, params: dict[str, str]) -> None:
        perm = param_permission(params, 0o755)
        self._send_json(self.emulator.namespace.mkdirs(user, path, perm))

    def _nn_rename(self, user: str, path: str, params: dict[str, str]) -> None:
        raw = params.get("destination")
        if not raw:
            raise _bad_param("destination", "null")
        if not raw.startswith("/"):
            raise _bad_param("destination", f"Invalid parameter value: destination = {raw} "
                                            "is not an absolute path")
        dst = normalize_path(raw)
        self._send_json(self.emulator.namespace.rename(user, path, dst))

    def _nn_delete(self, user: str, path: str, params: dict[str, str]) -> None:
        recursive = param_bool(params, "recursive", False)
        self._send_json(self.emulator.namespace.delete(user, path, recursive))

    def _nn_setpermission(self, user: str, path: str, params: dict[str, str]) -> None:
        self.emulator.namespace.set_permission(user, path, param_permission(params, 0o755))
        self._send(200)

    def _nn_setowner(self, user: str, path: str, params: dict[str, str]) -> None:
        self.emulator.namespace.set_owner(user, path, params.get("owner") or None,
                                          params.get("group") or None)
        self._send(200)

    # -- datanode ----------------------------------------------------------------------------
    @staticmethod
    def _validate_create_params(params: dict[str, str]) -> tuple[bool, int, int | None,
                                                                  int | None]:
        overwrite = param_bool(params, "overwrite", False)
        perm = param_permission(params, 0o644)
        replication = param_long(params, "replication", None, 1, 32767)
        block_size = param_long(params, "blocksize", None, 1)
        param_long(params, "buffersize", None, 1, 2**31 - 1)
        return overwrite, perm, replication, block_size

    def _receive_into(self, local: Path, mode: str) -> None:
        with local.open(mode) as out:
            for piece in self._body():
                out.write(piece)

    def _dn_create(self, user: str, path: str, params: dict[str, str]) -> None:
        try:
            overwrite, perm, replication, block_size = self._validate_create_params(params)
            local, file_id = self.emulator.namespace.begin_create(
                user, path, overwrite=overwrite, perm=perm, replication=replication,
                block_size=block_size, holder=self.emulator.new_client_name())
        except RemoteError as err:
            self._error(err, True)
            return
        try:
            self._receive_into(local, "ab")
        finally:
            self.emulator.namespace.finish_write(file_id)
        location = f"webhdfs://{self.emulator.host}:{self.emulator.port}{quote(path)}"
        self._send(201, headers={"Location": location})

    def _dn_append(self, user: str, path: str, params: dict[str, str]) -> None:
        try:
            param_long(params, "buffersize", None, 1, 2**31 - 1)
            local, file_id = self.emulator.namespace.begin_append(
                user, path, self.emulator.new_client_name())
        except RemoteError as err:
            self._error(err, True)
            return
        try:
            self._receive_into(local, "ab")
        finally:
            self.emulator.namespace.finish_write(file_id)
        self._send(200)

    def _dn_open(self, user: str, path: str, params: dict[str, str]) -> None:
        self._discard_body()
        offset = param_long(params, "offset", 0, 0) or 0
        length = param_long(params, "length", None, 0)
        param_long(params, "buffersize", None, 1, 2**31 - 1)
        local, start, count = self.emulator.namespace.open_range(user, path, offset, length)
        with local.open("rb") as src:
            src.seek(start)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            remaining = count
            while remaining:
                piece = src.read(min(remaining, CHUNK))
                if not piece:  # truncated underneath us: the length promised cannot be kept
                    self.close_connection = True
                    return
                self.wfile.write(piece)
                remaining -= len(piece)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------
def _parse_user_groups(spec: str) -> dict[str, set[str]]:
    """``alice=staff,dev;bob=dev`` -> {"alice": {"staff", "dev"}, "bob": {"dev"}}."""
    out: dict[str, set[str]] = {}
    for item in filter(None, spec.split(";")):
        user, _, groups = item.partition("=")
        out[user.strip()] = {g.strip() for g in groups.split(",") if g.strip()}
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the emulator until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="namenode port (0: any free)")
    parser.add_argument("--data-port", type=int, default=0, help="datanode port (0: any free)")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--superuser", default="hdfs")
    parser.add_argument("--supergroup", default="supergroup")
    parser.add_argument("--user-groups", default="", help="alice=staff,dev;bob=dev")
    parser.add_argument("--default-replication", type=int, default=3)
    parser.add_argument("--default-block-size", type=int, default=134217728)
    parser.add_argument("--min-block-size", type=int, default=1048576)
    parser.add_argument("--mkdir", action="append", default=[],
                        help="PATH:OWNER:OCTAL, created at start if missing (repeatable)")
    args = parser.parse_args(argv)

    args.data_dir.mkdir(parents=True, exist_ok=True)
    namespace = Namespace(args.data_dir, superuser=args.superuser, supergroup=args.supergroup,
                          user_groups=_parse_user_groups(args.user_groups),
                          default_replication=args.default_replication,
                          default_block_size=args.default_block_size,
                          min_block_size=args.min_block_size)
    for spec in args.mkdir:
        path, owner, perm = spec.rsplit(":", 2)
        namespace.initial_dir(path, owner, int(perm, 8))
    emulator = Emulator(namespace, args.host, args.port, args.data_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    emulator.start()
    print(f"webhdfs emulator: namenode http://{args.host}:{emulator.port} datanode "
          f"http://{args.host}:{emulator.data_port} data {args.data_dir}", flush=True)
    stop.wait()
    emulator.stop()
    print("webhdfs emulator: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
