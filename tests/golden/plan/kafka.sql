CREATE SECRET kafka_pw AS 'hunter2-kafka';
CREATE SECRET ca_pem AS '-----BEGIN CERTIFICATE-----';
CREATE SECRET client_cert AS '-----BEGIN CERTIFICATE----- client';
CREATE SECRET client_key AS '-----BEGIN PRIVATE KEY-----';
CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false);
-- case: connection_one_broker
CREATE CONNECTION k2 TO KAFKA (BROKER = 'broker-1:9092');
-- case: connection_materialize_spelling_without_equals
CREATE CONNECTION k2 TO KAFKA (BROKER 'broker-1:9092', SECURITY PROTOCOL 'SASL_PLAINTEXT',
    SASL MECHANISMS 'PLAIN', SASL USERNAME 'icesql', SASL PASSWORD = SECRET kafka_pw) WITH (VALIDATE = false);
-- case: connection_brokers_sasl_ssl
CREATE CONNECTION IF NOT EXISTS k2 TO KAFKA (
    BROKERS = ('b1:9092', 'b2:9093',),
    SECURITY PROTOCOL = 'sasl_ssl',
    SASL MECHANISMS = 'scram-sha-512',
    SASL USERNAME = SECRET kafka_pw,
    SASL PASSWORD = SECRET kafka_pw,
    SSL CERTIFICATE AUTHORITY = SECRET ca_pem
);
-- case: connection_mutual_tls
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b1:9093', SECURITY PROTOCOL = 'SSL',
    SSL CERTIFICATE AUTHORITY = '-----BEGIN CERTIFICATE-----', SSL CERTIFICATE = SECRET client_cert,
    SSL KEY = SECRET client_key);
-- case: source_json
CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json',
    SCHEMA = 'id BIGINT, ts TIMESTAMP, amount DECIMAL(10,2)');
-- case: source_every_option
CREATE SOURCE IF NOT EXISTS orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'csv',
    SCHEMA = 'id BIGINT, sku STRING', HEADER = false, START OFFSET = 'latest',
    MAX RECORDS PER TRIGGER = 100000, MAX BYTES PER TRIGGER = '64MiB', ON ERROR = 'dead-letter',
    CONSUMER GROUP = 'icesql-orders', ON DATA LOSS = 'continue');
-- case: source_start_timestamp_iso_utc
CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text',
    START TIMESTAMP = '2026-01-01T00:00:00Z');
-- case: source_start_timestamp_without_zone_is_utc
CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text',
    START TIMESTAMP = '2026-01-01 00:00:00');
-- case: source_start_timestamp_with_offset_zone
CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'bytes',
    START TIMESTAMP = '2026-01-01T02:00:00+02:00');
-- case: source_start_timestamp_epoch_ms
CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'bytes',
    START TIMESTAMP = 1767225600000);
-- case: source_text_value
CREATE SOURCE lines FROM KAFKA CONNECTION k (TOPIC = 'logs', FORMAT = 'text');
-- case: source_bytes_value_include_all
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'bytes')
    INCLUDE KEY, PARTITION, OFFSET, TIMESTAMP, HEADERS;
-- case: source_include_renamed_bytes_key
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'json', SCHEMA = 'v STRING',
    KEY FORMAT = 'bytes') INCLUDE KEY AS k, PARTITION AS p, OFFSET AS o, TIMESTAMP AS ts, HEADERS AS h;
-- case: source_include_json_key_is_a_struct
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'json', SCHEMA = 'v STRING',
    KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT, region STRING') INCLUDE KEY AS record_key;
-- case: source_upsert_text_key
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'name STRING, email STRING', ENVELOPE = 'upsert') INCLUDE OFFSET;
-- case: source_upsert_json_key
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'name STRING, email STRING', ENVELOPE = 'upsert', KEY FORMAT = 'json',
    KEY SCHEMA = 'id BIGINT NOT NULL, region STRING') INCLUDE PARTITION, OFFSET;
-- case: source_upsert_bytes_key_bytes_value
CREATE SOURCE blobs FROM KAFKA CONNECTION k (TOPIC = 'blobs', FORMAT = 'bytes', ENVELOPE = 'upsert',
    KEY FORMAT = 'bytes');
-- case: source_materialize_trailing_clauses
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC 'users', SCHEMA = 'name STRING')
    KEY FORMAT TEXT VALUE FORMAT JSON INCLUDE PARTITION, TIMESTAMP AS ts ENVELOPE UPSERT;
-- case: source_materialize_format_bytes
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC 'raw') FORMAT BYTES ENVELOPE NONE;
-- case: source_debezium
CREATE SOURCE cdc FROM KAFKA CONNECTION k (TOPIC = 'db.public.users', FORMAT = 'debezium-json',
    SCHEMA = 'id BIGINT, name STRING') INCLUDE PARTITION, OFFSET;
-- case: alter_kafka_source_schema_recomputes_columns
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'name STRING', ENVELOPE = 'upsert') INCLUDE OFFSET;
ALTER SOURCE users SET (SCHEMA = 'name STRING, email STRING');
-- case: sink_upsert_on_the_record_key
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'name STRING', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT, region STRING');
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/w');
CREATE SINK s FROM users INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'users')
    KEY (region, id) MODE UPSERT PARTITION BY (region);
-- case: sink_append_partitioned_by_metadata
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'json', SCHEMA = 'v STRING')
    INCLUDE PARTITION, TIMESTAMP AS ts;
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/w');
CREATE SINK s FROM raw INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'raw') PARTITION BY (day(ts), partition);
-- case: source_topics_have_a_topic_column
CREATE SOURCE shards FROM KAFKA CONNECTION k (TOPICS = ('orders.eu', 'orders.us'), FORMAT = 'json',
    SCHEMA = 'id BIGINT, amount DOUBLE') INCLUDE PARTITION, OFFSET;
-- case: source_topic_pattern_include_topic_as
CREATE SOURCE inventory FROM KAFKA CONNECTION k (TOPIC PATTERN = 'dbserver1\.inventory\..*', FORMAT = 'debezium-json',
    SCHEMA = 'id BIGINT, name STRING', TOPIC METADATA REFRESH INTERVAL = '5s') INCLUDE TOPIC AS source_topic, OFFSET;
-- case: source_topic_pattern_materialize_spelling
CREATE SOURCE logs FROM KAFKA CONNECTION k (TOPIC PATTERN 'logs-.*', TOPIC REFRESH '1 minute') FORMAT TEXT;
-- case: source_one_topic_include_topic
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text') INCLUDE TOPIC;
-- case: sink_partitioned_by_topic
CREATE SOURCE shards FROM KAFKA CONNECTION k (TOPIC PATTERN = 'orders\..*', FORMAT = 'json', SCHEMA = 'id BIGINT');
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/w');
CREATE SINK s FROM shards INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'orders') PARTITION BY (topic);
