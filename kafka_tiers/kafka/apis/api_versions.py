"""ApiVersions (key 18): the served APIs and their version ranges, from the registry."""

from __future__ import annotations

from typing import Any

from kafka_tiers.kafka.context import RequestContext
from kafka_tiers.kafka.registry import handles


@handles(18, 0, 4)
def api_versions(ctx: RequestContext, request: Any) -> Any:
    """Every served API with exactly the versions its handler serves (an unsupported
    ApiVersions version is answered by the server itself: v0 body, UNSUPPORTED_VERSION)."""
    keys = [(a.key, a.min_version, a.max_version)
            for a in sorted(ctx.server.apis.values(), key=lambda a: a.key)]
    fields: dict[str, Any] = {"error_code": 0, "api_keys": keys}
    if ctx.version >= 1:
        fields["throttle_time_ms"] = 0
    return ctx.response(**fields)
