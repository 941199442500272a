"""The ``hdfs`` remote storage plugin: the object-store level of kafka-tiers on HDFS.

Only the object store is written here (:mod:`kafka_tiers_hdfs.store`); the key layout, the
manifest-last commit protocol, listing, retries, cleanup of failed copies and garbage
collection are inherited from :class:`kafka_tiers.api.ObjectStoreRemoteStorageManager`.

Configure it in ``server.properties``::

    remote.log.storage.enable=true
    remote.storage.manager.class=hdfs
    rsm.config.hdfs.namenode.url=http://nn1:9870,http://nn2:9870
    rsm.config.hdfs.user=kafka
    rsm.config.hdfs.base.dir=/kafka/remote

``configure`` contacts no server: a cluster that is down when the broker starts does not stop
the broker; copies fail with retriable errors until it is back.
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import requests
from hdfs import Client, InsecureClient

from kafka_tiers.api import (
    ConfigError,
    ObjectStoreRemoteStorageManager,
    RemoteStorageError,
    StorageCapability,
    TopicPartition,
)
from kafka_tiers.api.objectstore import default_translate, partition_prefix
from kafka_tiers_hdfs.settings import KERBEROS_ENABLED, USER, HdfsSettings
from kafka_tiers_hdfs.store import HdfsObjectStore, raise_for_server_error, translate

#: The ``hdfs`` package's logger: it logs every WebHDFS call at INFO.
HDFS_LOGGER = "hdfs"


def quiet_hdfs_logging() -> None:
    """Raise the ``hdfs`` package's logger to WARNING unless its level was set: it logs every
    call (each read, write, rename, delete) at INFO, a dozen lines per segment copy in a
    broker's log. Setting the ``hdfs`` logger's level (to INFO or DEBUG) in the logging
    configuration, before or after, brings its lines back; this never lowers a level."""
    logger = logging.getLogger(HDFS_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


class _Session(requests.Session):
    """A session whose configured ``verify`` (a CA bundle path, or False) wins over
    ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, which plain requests would prefer (requests
    issue 3829); with the default (True) those variables still apply."""

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any,
                                   cert: Any) -> dict[str, Any]:
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if verify is None and self.verify is not True:
            settings["verify"] = self.verify
        return settings


def make_client(settings: HdfsSettings, session: requests.Session) -> Client:
    """The ``hdfs`` client for these settings, sending through ``session``.

    Simple authentication uses ``InsecureClient`` (``user.name``); Kerberos uses
    ``hdfs.ext.kerberos.KerberosClient``, imported only then. Several namenode URLs are given
    to the client ``;``-separated: it tries the next one on a connection error or a
    StandbyException and keeps using the one that answered.

    Raises:
        ConfigError: Kerberos is enabled but the ``kerberos`` extra is not installed, or no
            user is configured and the OS user cannot be determined.
    """
    url = ";".join(settings.namenode_urls)
    if settings.kerberos:
        try:
            from hdfs.ext.kerberos import KerberosClient
        except ImportError as exc:
            raise ConfigError(
                f"{KERBEROS_ENABLED}=true needs the kerberos extra ({exc.name or exc} is "
                "missing): pip install 'kafka-tiers-hdfs[kerberos]'", key=KERBEROS_ENABLED,
                value="true", expected="the kerberos extra installed") from None
        extra: dict[str, Any] = {}
        if settings.principal:
            extra["principal"] = settings.principal
        return KerberosClient(url, mutual_auth=settings.mutual_auth, proxy=settings.user,
                              timeout=settings.timeout_s, session=session, **extra)
    user = settings.user
    if user is None:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            raise ConfigError(f"{USER} is required: the OS user cannot be determined",
                              key=USER, expected="an HDFS user name") from None
    return InsecureClient(url, user=user, timeout=settings.timeout_s, session=session)


class HdfsRemoteStorageManager(ObjectStoreRemoteStorageManager):
    """The ``hdfs`` storage plugin (see the module docstring and the README's config table).

    Declares ``concurrent_access`` besides the object-store level's capabilities: the client
    is safe to share between threads (one ``requests`` session; the HA state is locked).
    """

    SUPPORTED_SPI: ClassVar[str] = ">=1.0,<2"
    CAPABILITIES: ClassVar[frozenset[str]] = ObjectStoreRemoteStorageManager.CAPABILITIES | {
        StorageCapability.CONCURRENT_ACCESS}

    _hdfs_store: HdfsObjectStore | None = None

    def create_object_store(self, config: Mapping[str, str]) -> HdfsObjectStore:
        """Check the config and build the store (no request is sent).

        Raises:
            ConfigError: a missing or malformed value (one line naming the key).
        """
        settings = HdfsSettings.from_config(config)
        quiet_hdfs_logging()
        session = _Session()
        session.verify = settings.tls_verify
        session.hooks["response"].append(raise_for_server_error)
        try:
            client = make_client(settings, session)
        except BaseException:
            session.close()
            raise
        # kept for collect_orphans even when wrap_object_store wraps it
        self._hdfs_store = HdfsObjectStore(
            client, settings.base_dir, session=session, replication=settings.replication,
            block_size=settings.block_size, buffer_size=settings.buffer_size,
            upload_chunk_size=settings.upload_chunk_size)
        return self._hdfs_store

    def close(self) -> None:
        self._hdfs_store = None
        super().close()

    def collect_orphans(self, min_age_ms: int, topic_partition: TopicPartition | None = None,
                        *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """As :meth:`ObjectStoreRemoteStorageManager.collect_orphans`; also deletes the
        temporary files of failed writes (those whose own cleanup failed) at least
        ``min_age_ms`` old under the same scope. They are not objects, so they are not in the
        returned list."""
        removed = super().collect_orphans(min_age_ms, topic_partition, now_ms=now_ms,
                                          dry_run=dry_run)
        store = self._hdfs_store
        if store is not None:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            if topic_partition is not None:
                prefix = partition_prefix(self.key_prefix, topic_partition)
            else:
                prefix = f"{self.key_prefix}/" if self.key_prefix else ""
            try:
                store.collect_temporary_files(prefix, now - min_age_ms, dry_run=dry_run)
            except RemoteStorageError:
                raise
            except Exception as exc:
                where = prefix or None
                raise (translate(exc, where) or default_translate(exc, where)) from exc
        return removed


__all__ = ["HdfsRemoteStorageManager", "make_client"]
