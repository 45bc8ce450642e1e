"""FileIO properties: how the driver and Spark's executors reach a table's storage.

* ``aws_properties(aws, secrets=...)`` -> the ``s3.*`` properties of one AWS connection;
* ``io_properties(table=..., sink_aws=..., catalog_aws=..., secrets=...)`` -> what executors use
  to write a table's data files, layered (later wins): the catalog's AWS connection, what the
  catalog configured and vends for the table, the sink's ``USING AWS CONNECTION``;
* ``use_sink_file_io(catalog, sink_aws, secrets=...)`` -> the driver's commits use the same.

``IoProperties`` is a plain picklable ``dict[str, str]`` whose repr hides credentials; only
FileIO keys survive the layering, so catalog credentials (an OAuth2 secret, a bearer token, a
basic-auth password) never reach executors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from icesql.engine import aws as aws_credentials
from icesql.engine.failures import guarded
from icesql.engine.secrets import MASK, SecretValues
from icesql.plan import AwsConnectionPlan, SecretResolver

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

# FileIO property keys worth shipping to executors (pyiceberg FileIO implementations read these).
_FILE_IO_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "oss.", "hf.", "hdfs.", "pyarrow.")
_FILE_IO_KEYS = frozenset({"py-io-impl"})
# Keys of a FileIO dict that carry credentials: replaced as one unit, masked in reprs.
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
_SENSITIVE_KEY = re.compile(r"secret|token|password|credential|sas|key$", re.IGNORECASE)
_NOT_SENSITIVE_KEYS = frozenset({"s3.access-key-id", "client.access-key-id", "adls.account-name"})


class IoProperties(dict[str, str]):
    """FileIO properties for executors: a plain picklable dict whose repr hides credentials."""

    def __repr__(self) -> str:
        shown = {k: (MASK if is_sensitive_key(k) else v) for k, v in self.items()}
        return f"IoProperties({shown!r})"

    __str__ = __repr__


def is_sensitive_key(key: str) -> bool:
    return key not in _NOT_SENSITIVE_KEYS and bool(_SENSITIVE_KEY.search(key))


def file_io_only(props: dict[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in props.items()
        if isinstance(v, str) and (k in _FILE_IO_KEYS or k.startswith(_FILE_IO_PREFIXES))
    }


def layer(base: dict[str, str], top: dict[str, str]) -> dict[str, str]:
    """``top`` over ``base``; a layer that carries credentials replaces those below as a unit
    (no vended session token next to another key pair)."""
    out = dict(base)
    if any(k in top for k in CREDENTIAL_KEYS):
        for k in CREDENTIAL_KEYS:
            out.pop(k, None)
    out.update(top)
    return out


def aws_properties(aws: AwsConnectionPlan, *, secrets: SecretResolver) -> IoProperties:
    """FileIO properties (``s3.*``) of one AWS connection; assumes the role when one is set."""
    sec = SecretValues(secrets)
    return IoProperties(
        guarded(
            lambda: aws_credentials.s3_file_io(aws, sec),
            aws_credentials.label(aws),
            aws.endpoint,
            sec,
            "connect",
        )
    )


def io_properties(
    *,
    table: Table | None = None,
    sink_aws: AwsConnectionPlan | None = None,
    catalog_aws: AwsConnectionPlan | None = None,
    secrets: SecretResolver,
) -> IoProperties:
    """FileIO properties for writing a table's data files from Spark executors (see the module
    docstring for the layers)."""
    sec = SecretValues(secrets)

    def build() -> dict[str, str]:
        out: dict[str, str] = {}
        if catalog_aws is not None:
            out = layer(out, aws_credentials.s3_file_io(catalog_aws, sec))
        if table is not None:
            out = layer(out, file_io_only(dict(table.io.properties)))
        if sink_aws is not None:
            out = layer(out, aws_credentials.s3_file_io(sink_aws, sec))
        return out

    primary = sink_aws or catalog_aws
    label = aws_credentials.label(primary) if primary else "table FileIO"
    endpoint = primary.endpoint if primary else None
    return IoProperties(guarded(build, label, endpoint, sec, "connect"))


def use_sink_file_io(catalog: Catalog, sink_aws: AwsConnectionPlan, *, secrets: SecretResolver) -> Catalog:
    """Make the tables ``catalog`` loads or creates use the sink's ``USING AWS CONNECTION`` for
    their files, layered as ``io_properties`` layers it for executors.

    The driver writes manifests and manifest lists with ``table.io``, and ``Table.refresh()``
    takes a new FileIO from the catalog on every commit: without this, a catalog that neither
    vends storage credentials nor has an AWS CONNECTION of its own (a REST catalog with OAuth2)
    commits with a FileIO that has no endpoint and no keys, although the executors wrote the
    data files with the sink's.
    """
    from pyiceberg.io import load_file_io

    from icesql.engine.pyiceberg_internals import override_file_io

    def load(original: Any, properties: Any, location: str | None) -> Any:
        # per load (every commit refreshes): assumed-role credentials stay fresh
        top = dict(aws_properties(sink_aws, secrets=secrets))
        base = dict(original(properties, location).properties)
        return load_file_io(layer(base, top), location)

    return override_file_io(catalog, load)


__all__ = [
    "CREDENTIAL_KEYS",
    "IoProperties",
    "aws_properties",
    "file_io_only",
    "io_properties",
    "is_sensitive_key",
    "use_sink_file_io",
]
