"""The WebHDFS client of the ``hdfs`` store: simple or Kerberos authentication, HA namenodes,
TLS, and the ``hdfs`` package's logging kept quiet.

Building a client contacts no server: a cluster that is down when the broker starts does not
stop the broker; copies fail with retriable errors until it is back.
"""

from __future__ import annotations

import getpass
import logging
from typing import Any

import requests
from hdfs import Client, InsecureClient

from kafka_tiers.api import ConfigError
from kafka_tiers_hdfs.settings import KERBEROS_ENABLED, USER, HdfsSettings
from kafka_tiers_hdfs.store import raise_for_server_error

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


def new_session(settings: HdfsSettings) -> requests.Session:
    """The ``requests`` session of a store: TLS verification as configured, and every 4xx/5xx
    WebHDFS answer raised as :class:`~kafka_tiers_hdfs.store.WebHdfsServerError`."""
    session = _Session()
    session.verify = settings.tls_verify
    session.hooks["response"].append(raise_for_server_error)
    return session


__all__ = ["HDFS_LOGGER", "make_client", "new_session", "quiet_hdfs_logging"]
