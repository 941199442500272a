"""``kcat`` (the librdkafka command-line client), from Debian's ``kcat`` package, for the
real-client tests of the Kafka listener.

On first use, when ``kcat`` is not on the PATH and we are root, ``apt-get update`` and
``apt-get install -y --no-install-recommends kcat`` run under a file lock (once per machine),
the way :mod:`tests.servers.zookeeper` installs ZooKeeper. When it cannot be installed (not
root, no apt-get), :class:`~tests.servers.base.ServerUnavailable` carries the command to run:
the tests skip with it, and fail under ``CI``.
"""

from __future__ import annotations

import os
import shutil

from tests.servers.base import ServerUnavailable, cache_dir, install_lock, run_install

INSTALL_HINT = ("kcat is not installed. As root: apt-get update && apt-get install -y "
                "--no-install-recommends kcat (the tests do this themselves when run as root).")


def kcat_binary() -> str:
    """The path of ``kcat``, installed first when missing (root only, under a lock).

    Raises:
        ServerUnavailable: it is missing and cannot be installed here.
        ServerError: the install ran and failed (the message has the log's tail).
    """
    found = shutil.which("kcat")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ServerUnavailable(INSTALL_HINT)
    with install_lock("apt-kcat", timeout=1800):
        found = shutil.which("kcat")
        if found:
            return found
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        log = cache_dir() / "apt-kcat.log"
        wait_dpkg = ["-o", "DPkg::Lock::Timeout=600"]
        run_install(["apt-get", *wait_dpkg, "update", "-q"], log, env=env)
        run_install(["apt-get", *wait_dpkg, "install", "-y", "-q", "--no-install-recommends",
                     "kcat"], log, env=env)
    found = shutil.which("kcat")
    if not found:
        raise ServerUnavailable("apt-get installed kcat but it is not on the PATH")
    return found


__all__ = ["INSTALL_HINT", "kcat_binary"]
