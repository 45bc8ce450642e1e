"""S3 and S3-compatible stores (``s3://``, ``s3a://``, ``s3n://``) through an AWS connection:
keys, an assumed role or the default chain (``icesql.engine.connections.aws``)."""

from __future__ import annotations

import re

from icesql.engine.connections import aws
from icesql.engine.connections.stores.base import ObjectStore

CREDENTIAL_KEYS = (
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "client.access-key-id",
    "client.secret-access-key",
    "client.session-token",
    "s3.role-arn",
    "s3.role-session-name",
    "client.role-arn",
    "client.role-session-name",
    "s3.profile-name",
    "client.profile-name",
)

_AWS_ERROR = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d{3})\))?")


def _error_code(text: str) -> tuple[str, str] | None:
    found = _AWS_ERROR.search(text)
    return (found.group(1), found.group(2) or "") if found else None


S3 = ObjectStore(
    name="s3",
    schemes=("s3", "s3a", "s3n"),
    keyword="AWS",
    connection_kind="aws",
    file_io=aws.s3_file_io,
    credential_keys=CREDENTIAL_KEYS,
    validate=aws.check_connection,
    # pyarrow's S3 client (the AWS C++ SDK): "... AWS Error ACCESS_DENIED during PutObject ..."
    failure=re.compile(r"AWS Error"),
    check_hint="check the keys, REGION and ENDPOINT of the AWS connection, and the bucket",
    error_code=_error_code,
    auth_codes=frozenset({"ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "EXPIRED_TOKEN"}),
    not_found_codes=frozenset({"NO_SUCH_BUCKET", "NO_SUCH_KEY", "RESOURCE_NOT_FOUND"}),
    # the AWS C++ SDK's own transient kinds (failures._AWS_SDK_TRANSIENT names them for S3)
    transient_codes=frozenset(
        {"NETWORK_CONNECTION", "SLOW_DOWN", "SERVICE_UNAVAILABLE", "THROTTLING", "REQUEST_TIMEOUT", "INTERNAL_FAILURE"}
    ),
)
