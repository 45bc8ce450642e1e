"""Kafka records framed with a Confluent Schema Registry id (FORMAT AVRO | PROTOBUF | JSON USING
CONFLUENT SCHEMA REGISTRY CONNECTION csr): the framing, one columnar decoder per schema type, and
the mapping of a registry schema to the source's columns. ``kinds`` is the registry of schema types.
"""
