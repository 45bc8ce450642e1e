"""Validated, typed plans: what the analyzer produces and the executor consumes.

Frozen dataclasses with no Lark, pyiceberg or pyspark in sight. Plans never hold a secret's
value: options that take a secret hold a ``SecretName`` and the executor asks the catalog
store for the value at the moment it connects (see ``SecretResolver``). The one exception is
``CreateSecretPlan``, whose value is wrapped in ``Redacted`` so that ``repr``, ``str`` and
``to_dict`` never show it.

Every plan has ``to_dict()`` / ``plan_from_dict()`` so the catalog store can persist it as JSON.

This module is the one place callers import plans from; they are defined beside it, one job a
module: ``plan_vocabulary`` (enums, secret references, shared defaults), ``plan_objects`` (what
CREATE CONNECTION / SOURCE / VIEW / SINK define), ``plan_statements`` (one plan per statement
kind) and ``plan_json`` (the JSON form).
"""

from __future__ import annotations

from icesql.plan_json import plan_from_dict, to_dict
from icesql.plan_objects import (
    AwsConnectionPlan,
    AzureConnectionPlan,
    CatalogConnectionPlan,
    Column,
    CommitPolicy,
    GcsConnectionPlan,
    KafkaConnectionPlan,
    KafkaInclude,
    KafkaSourceSpec,
    MaintenancePolicy,
    ObjectPlan,
    PartitionFieldPlan,
    SchemaRegistryConnectionPlan,
    SinkPlan,
    SourcePlan,
    StorageConnectionPlan,
    ViewPlan,
)
from icesql.plan_statements import (
    AlterSinkPlan,
    AlterSourcePlan,
    CreateObjectPlan,
    CreateSecretPlan,
    DescribePlan,
    DescribeTablePlan,
    DropPlan,
    ExplainPlan,
    ExplainSelectPlan,
    FlushSinkPlan,
    SelectPlan,
    ShowCreatePlan,
    ShowPlan,
    ShowSinkStatusPlan,
    ShowSnapshotsPlan,
    ShowTablesPlan,
    StatementPlan,
    TableRef,
    ValidateConnectionPlan,
)
from icesql.plan_vocabulary import (
    DATA_FILE_FORMATS,
    DEFAULT_MAXIMUM_FILE_SIZE,
    DEFAULT_REGION,
    FORMAT_READERS,
    OMIT_AT_DEFAULT,
    WRITE_FORMAT_DEFAULT,
    CatalogType,
    CleanSource,
    DeleteMode,
    KafkaEnvelope,
    KafkaMetadata,
    OnError,
    Redacted,
    RestAuth,
    SecretName,
    SecretResolver,
    SinkMode,
    SourceFormat,
    SourceKind,
    Transform,
)

__all__ = [
    "DATA_FILE_FORMATS",
    "DEFAULT_MAXIMUM_FILE_SIZE",
    "DEFAULT_REGION",
    "FORMAT_READERS",
    "OMIT_AT_DEFAULT",
    "WRITE_FORMAT_DEFAULT",
    "AlterSinkPlan",
    "AlterSourcePlan",
    "AwsConnectionPlan",
    "AzureConnectionPlan",
    "CatalogConnectionPlan",
    "CatalogType",
    "CleanSource",
    "Column",
    "CommitPolicy",
    "CreateObjectPlan",
    "CreateSecretPlan",
    "DeleteMode",
    "DescribePlan",
    "DescribeTablePlan",
    "DropPlan",
    "ExplainPlan",
    "ExplainSelectPlan",
    "FlushSinkPlan",
    "GcsConnectionPlan",
    "KafkaConnectionPlan",
    "SchemaRegistryConnectionPlan",
    "KafkaEnvelope",
    "KafkaInclude",
    "KafkaMetadata",
    "KafkaSourceSpec",
    "MaintenancePolicy",
    "ObjectPlan",
    "OnError",
    "PartitionFieldPlan",
    "Redacted",
    "RestAuth",
    "SecretName",
    "SecretResolver",
    "SelectPlan",
    "ShowCreatePlan",
    "ShowPlan",
    "ShowSinkStatusPlan",
    "ShowSnapshotsPlan",
    "ShowTablesPlan",
    "SinkMode",
    "SinkPlan",
    "SourceFormat",
    "SourceKind",
    "SourcePlan",
    "StatementPlan",
    "StorageConnectionPlan",
    "TableRef",
    "Transform",
    "ValidateConnectionPlan",
    "ViewPlan",
    "plan_from_dict",
    "to_dict",
]
