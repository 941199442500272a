"""DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials (key 51, v0;
KIP-554): list and change the SCRAM credentials of the cluster (see
:mod:`kafka_tiers.kafka.security.scram_credentials`).

Kafka's rules:

- Describe needs DESCRIBE on the cluster, Alter needs ALTER on the cluster; denied, every
  user of the request is answered ``CLUSTER_AUTHORIZATION_FAILED`` (Describe: the top-level
  error too).
- Describe of no users (null or empty) lists every user with a credential; a user asked
  twice is ``DUPLICATE_RESOURCE``, a user without credential ``RESOURCE_NOT_FOUND``.
- Alter: a user named twice in one request (deletion or upsertion, any mechanism) is
  ``DUPLICATE_RESOURCE``; an empty user name or iterations outside 4096..16384 are
  ``UNACCEPTABLE_CREDENTIAL``; an unknown mechanism is ``UNSUPPORTED_SASL_MECHANISM``;
  deleting a credential that does not exist is ``RESOURCE_NOT_FOUND``. The accepted
  changes are applied in one atomic write of the shared store (any broker answers: there
  is no controller to forward to, every broker sees the change through the store's watch).
- Upsertions carry the salt and the SaltedPassword the client derived; the broker keeps
  only StoredKey and ServerKey. Neither is ever logged or echoed.

Where we differ: a request changing more credentials than ``max.request.partitions`` is
refused whole, every user answered ``INVALID_REQUEST`` (Kafka has no bound; the security
document is bounded in size, docs/operations.md).
"""

from __future__ import annotations

from typing import Any

from kafka_tiers.api.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafka_tiers.kafka.codec import response_class
from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.errors import CLUSTER_AUTHORIZATION_FAILED
from kafka_tiers.kafka.registry import handles
from kafka_tiers.kafka.security.scram_credentials import (
    MAX_FIELD_BYTES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credentials_of,
    from_salted_password,
)
from kafka_tiers.kafka.security.state_store import SecurityStateError

NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
INVALID_REQUEST = 42
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
UNKNOWN_SERVER_ERROR = -1

_DENIED = "not authorized to {} SCRAM credentials (needs {} on the cluster)"


@handles(50, 0, 0)
def describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    """The mechanisms and iterations of the users asked for (see the module docstring)."""
    result_cls = response_class(50, ctx.version).DescribeUserScramCredentialsResult
    info_cls = result_cls.CredentialInfo
    asked = [u.name for u in (request.users or [])]
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        message = _DENIED.format("describe", "DESCRIBE")
        return ctx.response(
            throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message,
            results=[result_cls(user=u, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                error_message=message, credential_infos=[])
                     for u in dict.fromkeys(asked)])
    creds = credentials_of(ctx.server)
    known = creds.describe(None if not asked else set(asked))
    results = []
    if not asked:
        users: dict[str, int] = dict.fromkeys(known, 1)
    else:
        users = {}
        for u in asked:
            users[u] = users.get(u, 0) + 1
    for user, count in users.items():
        if count > 1:
            results.append(result_cls(
                user=user, error_code=DUPLICATE_RESOURCE, credential_infos=[],
                error_message="cannot describe SCRAM credentials for the same user twice in "
                              f"a single request: {user}"))
        elif user not in known:
            results.append(result_cls(
                user=user, error_code=RESOURCE_NOT_FOUND, credential_infos=[],
                error_message=f"attempt to describe a user credential that does not exist: "
                              f"{user}"))
        else:
            results.append(result_cls(
                user=user, error_code=NONE, error_message=None,
                credential_infos=[info_cls(mechanism=m.type_code, iterations=i)
                                  for m, i in known[user]]))
    return ctx.response(throttle_time_ms=0, error_code=NONE, error_message=None,
                        results=results)


def _mechanism(code: int) -> ScramMechanism | None:
    try:
        return ScramMechanism.of(int(code))
    except ValueError:
        return None


def _check_user_and_mechanism(user: str, code: int) -> tuple[int, str] | None:
    if not user:
        return UNACCEPTABLE_CREDENTIAL, "username must not be empty"
    if _mechanism(code) is None:
        return UNSUPPORTED_SASL_MECHANISM, (f"unknown SCRAM mechanism {code} (1: SCRAM-SHA-256,"
                                            " 2: SCRAM-SHA-512)")
    return None


def _check_upsertion(up: Any) -> tuple[int, str] | None:
    bad = _check_user_and_mechanism(up.name, up.mechanism)
    if bad is not None:
        return bad
    if up.iterations < MIN_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, (f"too few iterations: {up.iterations} (at least "
                                         f"{MIN_ITERATIONS})")
    if up.iterations > MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, (f"too many iterations: {up.iterations} (at most "
                                         f"{MAX_ITERATIONS})")
    for what, value in (("salt", up.salt), ("salted password", up.salted_password)):
        if not value or len(value) > MAX_FIELD_BYTES:
            return UNACCEPTABLE_CREDENTIAL, (f"the {what} must be 1 to {MAX_FIELD_BYTES} "
                                             "bytes")
    return None


@handles(51, 0, 0)
def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    """Delete and add/replace SCRAM credentials (see the module docstring); one result per
    user named in the request."""
    result_cls = response_class(51, ctx.version).AlterUserScramCredentialsResult
    deletions = list(request.deletions or [])
    upsertions = list(request.upsertions or [])
    named = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))

    def everyone(code: int, message: str) -> Any:
        return ctx.response(throttle_time_ms=0, results=[
            result_cls(user=u, error_code=code, error_message=message) for u in sorted(named)])

    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return everyone(CLUSTER_AUTHORIZATION_FAILED, _DENIED.format("alter", "ALTER"))
    bound = int(ctx.config["max.request.partitions"])
    if len(deletions) + len(upsertions) > bound:
        return everyone(INVALID_REQUEST, f"{len(deletions) + len(upsertions)} SCRAM credential"
                        f" changes in one request exceed max.request.partitions {bound}; send"
                        " fewer per request")
    errors: dict[str, tuple[int, str]] = {}
    to_delete: dict[str, ScramMechanism] = {}
    to_upsert: dict[str, tuple[ScramMechanism, ScramCredential]] = {}
    duplicate = (DUPLICATE_RESOURCE, "a user credential cannot be altered twice in the same "
                                     "request")
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = duplicate
            continue
        bad = _check_user_and_mechanism(d.name, d.mechanism)
        if bad is not None:
            errors[d.name] = bad
        else:
            to_delete[d.name] = ScramMechanism.of(int(d.mechanism))
    for up in upsertions:
        if up.name in errors:
            continue
        if to_delete.pop(up.name, None) is not None or to_upsert.pop(up.name, None) is not None:
            errors[up.name] = duplicate
            continue
        bad = _check_upsertion(up)
        if bad is not None:
            errors[up.name] = bad
            continue
        mech = ScramMechanism.of(int(up.mechanism))
        to_upsert[up.name] = (mech, from_salted_password(mech, up.salt, up.salted_password,
                                                         up.iterations))
    if to_delete or to_upsert:
        try:
            missing = credentials_of(ctx.server).alter(
                {(user, mech): cred for user, (mech, cred) in to_upsert.items()},
                [(user, mech) for user, mech in to_delete.items()])
        except SecurityStateError as exc:
            for user in list(to_delete) + list(to_upsert):
                errors[user] = (UNKNOWN_SERVER_ERROR, f"the credentials could not be stored: "
                                                     f"{str(exc)[:200]}")
            to_delete, to_upsert = {}, {}
        else:
            for user in missing:
                to_delete.pop(user, None)
                errors[user] = (RESOURCE_NOT_FOUND, "attempt to delete a user credential that "
                                                    "does not exist")
    results = [result_cls(user=u, error_code=NONE, error_message=None)
               for u in list(to_delete) + list(to_upsert)]
    results += [result_cls(user=u, error_code=code, error_message=message)
                for u, (code, message) in errors.items()]
    return ctx.response(throttle_time_ms=0, results=results)


__all__ = ["alter_user_scram_credentials", "describe_user_scram_credentials"]
