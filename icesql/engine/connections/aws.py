"""AWS credentials of an AWS connection: keys, an assumed role, or the default chain.

* ``credentials(aws, sec)`` -> ``access_key_id`` / ``secret_access_key`` / ``session_token``
  from the connection's keys (secrets resolved through ``sec``), STS ``AssumeRole`` (cached
  until shortly before expiry: 5 minutes, or a quarter of a shorter lifetime; with an
  ``ENDPOINT`` the STS calls go there, as MinIO and SeaweedFS serve STS on their S3 port), or
  boto3's default credential chain;
* ``s3_file_io(aws, sec)`` -> the ``s3.*`` FileIO properties (keys, region, endpoint,
  path-style addressing for S3-compatible stores);
* ``client_properties(aws, sec, prefix)`` -> ``<prefix>.access-key-id`` etc. for the boto3
  sessions pyiceberg builds itself (SigV4 signing, Glue);

Every secret value met here is remembered for masking (``icesql.engine.base.secrets``).

``AssumeRole`` is tested against SeaweedFS's STS (``weed mini`` with an IAM config, credentials
living 20 s); AWS's own STS and the default chain beyond environment variables are untested
here (no AWS access on the test machines).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from icesql.engine.base.secrets import SecretValues, remember_secret
from icesql.plan import DEFAULT_REGION, AwsConnectionPlan

_ROLE_CACHE: dict[tuple[str, str, str, str | None, str | None], tuple[float, dict[str, str]]] = {}
_ROLE_CACHE_LOCK = threading.Lock()


def label(aws: AwsConnectionPlan) -> str:
    return f"AWS connection '{aws.name}'"


def boto_config(**extra: Any) -> Any:
    from botocore.config import Config

    return Config(
        connect_timeout=5, read_timeout=20, retries={"max_attempts": 2, "mode": "standard"}, **extra
    )


def _assume_role(
    aws: AwsConnectionPlan, key: str | None, secret: str | None, token: str | None
) -> dict[str, str]:
    """Temporary keys from STS AssumeRole, cached until shortly before they expire (``_renew_at``).

    With an ``ENDPOINT`` the call goes there (S3-compatible stores serve STS on their S3 port).
    """
    import boto3

    assert aws.assume_role_arn
    session_name = aws.assume_role_session_name or "icesql"
    cache_key = (aws.name, aws.assume_role_arn, session_name, key, aws.region)
    now = time.time()
    with _ROLE_CACHE_LOCK:
        hit = _ROLE_CACHE.get(cache_key)
    if hit and hit[0] > now:
        return dict(hit[1])
    sts = boto3.client(
        "sts",
        region_name=aws.signing_region,
        endpoint_url=aws.endpoint or None,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=boto_config(),
    )
    resp = sts.assume_role(RoleArn=aws.assume_role_arn, RoleSessionName=session_name)
    creds = resp["Credentials"]
    out = {
        "access_key_id": creds["AccessKeyId"],
        "secret_access_key": creds["SecretAccessKey"],
        "session_token": creds["SessionToken"],
    }
    remember_secret(out["secret_access_key"])
    remember_secret(out["session_token"])
    expires = creds.get("Expiration")
    expiry = expires.timestamp() if hasattr(expires, "timestamp") else now + 3600
    with _ROLE_CACHE_LOCK:
        _ROLE_CACHE[cache_key] = (_renew_at(now, expiry), out)
    return dict(out)


def _renew_at(issued: float, expiry: float) -> float:
    """When cached role credentials are replaced: 5 minutes before they expire, or a quarter of
    their lifetime before when they live under 20 minutes (a batch started just before must
    still finish with them)."""
    return expiry - min(300.0, max(0.0, expiry - issued) / 4)


def forget_role_credentials() -> None:
    """Drop every cached role credential (a store refused them: the next call assumes anew)."""
    with _ROLE_CACHE_LOCK:
        _ROLE_CACHE.clear()


def credentials(aws: AwsConnectionPlan, sec: SecretValues) -> dict[str, str]:
    """access_key_id / secret_access_key / session_token, from keys, a role, or the default chain
    (resolved once per ``sec``: one call of the caller)."""
    cached = sec.aws_credentials.get(aws.name)
    if cached is None:
        cached = sec.aws_credentials[aws.name] = _resolve(aws, sec)
    return dict(cached)


def _resolve(aws: AwsConnectionPlan, sec: SecretValues) -> dict[str, str]:
    key = sec.plain(aws.access_key_id)
    secret = sec.secret(aws.secret_access_key)
    token = sec.secret(aws.session_token)
    if aws.assume_role_arn:
        return _assume_role(aws, key, secret, token)
    if key and secret:
        out = {"access_key_id": key, "secret_access_key": secret}
        if token:
            out["session_token"] = token
        return out
    # No keys: the default AWS credential chain (environment, profile, container, instance).
    import boto3

    creds = boto3.Session(region_name=aws.region).get_credentials()
    if creds is None:
        return {}
    frozen = creds.get_frozen_credentials()
    out = {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key}
    remember_secret(frozen.secret_key)
    if frozen.token:
        out["session_token"] = frozen.token
        remember_secret(frozen.token)
    return out


def s3_file_io(aws: AwsConnectionPlan, sec: SecretValues) -> dict[str, str]:
    """The ``s3.*`` FileIO properties of ``aws`` (pyarrow's and iceberg-rust's spellings)."""
    creds = credentials(aws, sec)
    props: dict[str, str] = {}
    if "access_key_id" in creds:
        props["s3.access-key-id"] = creds["access_key_id"]
        props["s3.secret-access-key"] = creds["secret_access_key"]
    if "session_token" in creds:
        props["s3.session-token"] = creds["session_token"]
    # An S3-compatible endpoint gets a region too: without one pyarrow asks AWS where the bucket is.
    region = aws.region or (DEFAULT_REGION if aws.endpoint else None)
    if region:
        props["s3.region"] = region
    if aws.endpoint:
        props["s3.endpoint"] = aws.endpoint
        props["s3.force-virtual-addressing"] = "false"  # pyarrow: path-style requests
        props["s3.path-style-access"] = "true"  # iceberg-rust / Java spelling of the same
    return props


def client_properties(aws: AwsConnectionPlan | None, sec: SecretValues, prefix: str) -> dict[str, str]:
    """``<prefix>.access-key-id`` etc. for boto3 sessions pyiceberg builds (SigV4, Glue)."""
    if aws is None:
        return {}
    creds = credentials(aws, sec)
    props = {f"{prefix}.region": aws.signing_region}
    if "access_key_id" in creds:
        props[f"{prefix}.access-key-id"] = creds["access_key_id"]
        props[f"{prefix}.secret-access-key"] = creds["secret_access_key"]
    if "session_token" in creds:
        props[f"{prefix}.session-token"] = creds["session_token"]
    return props


def check_connection(aws: AwsConnectionPlan, sec: SecretValues) -> None:
    """With ENDPOINT: S3 ListBuckets there. Without: STS GetCallerIdentity (needs AWS)."""
    import boto3

    creds = credentials(aws, sec)
    if not creds:
        from botocore.exceptions import NoCredentialsError

        raise NoCredentialsError()
    kwargs = {
        "region_name": aws.signing_region,
        "aws_access_key_id": creds.get("access_key_id"),
        "aws_secret_access_key": creds.get("secret_access_key"),
        "aws_session_token": creds.get("session_token"),
    }
    if aws.endpoint:
        client = boto3.client(
            "s3",
            endpoint_url=aws.endpoint,
            config=boto_config(s3={"addressing_style": "path"}),
            **kwargs,
        )
        client.list_buckets()
    else:
        boto3.client("sts", config=boto_config(), **kwargs).get_caller_identity()


__all__ = [
    "check_connection",
    "client_properties",
    "credentials",
    "label",
    "s3_file_io",
]
