CREATE SECRET kafka_pw AS 'hunter2-kafka';
CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false);
CREATE CONNECTION aws TO AWS (REGION = 'eu-west-1') WITH (VALIDATE = false);
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/w');
-- case: connection_needs_broker
CREATE CONNECTION k2 TO KAFKA (SECURITY PROTOCOL = 'SSL');
-- case: connection_no_options
CREATE CONNECTION k2 TO KAFKA;
-- case: connection_broker_without_port
CREATE CONNECTION k2 TO KAFKA (BROKER = 'localhost');
-- case: connection_broker_is_a_url
CREATE CONNECTION k2 TO KAFKA (BROKERS = ('b1:9092', 'kafka://b2:9092'));
-- case: connection_broker_bad_port
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b1:99999');
-- case: connection_brokers_in_one_string
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b1:9092, b2:9092');
-- case: connection_unknown_option
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOLL = 'SSL');
-- case: connection_unknown_protocol
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSLL');
-- case: connection_unknown_mechanism
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'GSSAPI');
-- case: connection_sasl_needs_sasl_protocol
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SASL MECHANISMS = 'PLAIN', SASL USERNAME = 'u',
    SASL PASSWORD = SECRET kafka_pw);
-- case: connection_sasl_protocol_needs_mechanism
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_PLAINTEXT', SASL USERNAME = 'u',
    SASL PASSWORD = SECRET kafka_pw);
-- case: connection_sasl_needs_password
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN',
    SASL USERNAME = 'u');
-- case: connection_sasl_password_plain_string
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN',
    SASL USERNAME = 'u', SASL PASSWORD = 'hunter2-plain-text');
-- case: connection_ssl_key_plain_string
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SSL',
    SSL CERTIFICATE = SECRET kafka_pw, SSL KEY = '-----BEGIN PRIVATE KEY----- abc');
-- case: connection_ssl_needs_ssl_protocol
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SSL CERTIFICATE AUTHORITY = 'pem');
-- case: connection_ssl_certificate_needs_key
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SSL', SSL CERTIFICATE = SECRET kafka_pw);
-- case: connection_unknown_secret
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', SECURITY PROTOCOL = 'SASL_SSL', SASL MECHANISMS = 'PLAIN',
    SASL USERNAME = 'u', SASL PASSWORD = SECRET kafka_pww);
-- case: connection_broker_and_brokers
CREATE CONNECTION k2 TO KAFKA (BROKER = 'b:9092', BROKERS = ('c:9092'));
-- case: source_unknown_connection
CREATE SOURCE s FROM KAFKA CONNECTION kk (TOPIC = 'orders', FORMAT = 'text');
-- case: source_connection_not_kafka
CREATE SOURCE s FROM KAFKA CONNECTION aws (TOPIC = 'orders', FORMAT = 'text');
-- case: source_connection_is_a_catalog
CREATE SOURCE s FROM KAFKA CONNECTION lake (TOPIC = 'orders', FORMAT = 'text');
-- case: source_needs_topic
CREATE SOURCE s FROM KAFKA CONNECTION k (FORMAT = 'text');
-- case: source_needs_format
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders');
-- case: source_unknown_format
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro');
-- case: source_parquet_is_files_only
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'parquet');
-- case: source_json_needs_schema
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json');
-- case: source_text_refuses_schema
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', SCHEMA = 'v STRING');
-- case: source_upsert_refuses_debezium
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'debezium-json', SCHEMA = 'id BIGINT',
    ENVELOPE = 'upsert');
-- case: source_unknown_envelope
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') ENVELOPE DEBEZIUM;
-- case: source_json_key_needs_key_schema
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', ENVELOPE = 'upsert',
    KEY FORMAT = 'json');
-- case: source_key_schema_needs_json_key
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', ENVELOPE = 'upsert',
    KEY SCHEMA = 'id BIGINT');
-- case: source_key_format_without_key
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', KEY FORMAT = 'bytes');
-- case: source_key_schema_invalid
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', ENVELOPE = 'upsert',
    KEY FORMAT = 'json', KEY SCHEMA = 'id BIGNT');
-- case: source_start_offset_and_timestamp
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', START OFFSET = 'earliest',
    START TIMESTAMP = '2026-01-01T00:00:00Z');
-- case: source_start_offset_value
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', START OFFSET = 'beginning');
-- case: source_on_data_loss_value
CREATE SOURCE o FROM KAFKA CONNECTION k (TOPIC = 'o', FORMAT = 'text', ON DATA LOSS = 'skip');
-- case: source_start_timestamp_invalid
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', START TIMESTAMP = 'yesterday');
-- case: source_start_timestamp_before_1970
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', START TIMESTAMP = '1969-12-31T00:00:00Z');
-- case: source_max_records_positive
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', MAX RECORDS PER TRIGGER = 0);
-- case: source_files_option_on_kafka
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT',
    CLEAN SOURCE = 'delete');
-- case: source_max_files_on_kafka
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', MAX FILES PER TRIGGER = 5);
-- case: source_kafka_option_on_files
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = 'id BIGINT', TOPIC = 'orders');
-- case: source_kafka_option_on_generator
CREATE SOURCE s FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT', START OFFSET = 'latest');
-- case: source_unknown_option_did_you_mean
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', MAX RECORD PER TRIGGER = 5);
-- case: source_header_only_csv
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT', HEADER = true);
-- case: source_format_twice
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT') FORMAT TEXT;
-- case: source_include_unknown
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') INCLUDE PARTITION, OFFST;
-- case: source_include_twice
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') INCLUDE OFFSET, OFFSET AS o;
-- case: source_include_clashes_with_value
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT, partition INT')
    INCLUDE PARTITION;
-- case: source_include_clashes_with_text_value
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') INCLUDE OFFSET AS Value;
-- case: source_include_key_clashes_with_upsert_key
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', ENVELOPE = 'upsert') INCLUDE KEY;
-- case: source_include_names_clash
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') INCLUDE OFFSET AS o, PARTITION AS O;
-- case: source_upsert_key_clashes_with_value
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT, name STRING',
    ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT');
-- case: source_topic_with_blank
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'my orders', FORMAT = 'text');
-- case: sink_upsert_key_not_the_record_key
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'name STRING', ENVELOPE = 'upsert', KEY FORMAT = 'json', KEY SCHEMA = 'id BIGINT');
CREATE SINK s FROM users INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'users') KEY (name) MODE UPSERT;
-- case: sink_upsert_text_key_missing
CREATE SOURCE users FROM KAFKA CONNECTION k (TOPIC = 'users', FORMAT = 'json',
    SCHEMA = 'id BIGINT, name STRING', ENVELOPE = 'upsert');
CREATE SINK s FROM users INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'users') KEY (id);
-- case: sink_key_column_missing_in_kafka_source
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text') INCLUDE OFFSET;
CREATE SINK s FROM raw INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'raw') KEY (offst);
-- case: sink_partition_by_value_of_text_source
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text');
CREATE SINK s FROM raw INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'raw') PARTITION BY (day(value));
-- case: sink_catalog_is_kafka
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text');
CREATE SINK s FROM raw INTO ICEBERG CATALOG k (NAMESPACE = 'db', TABLE = 'raw');
-- case: sink_using_kafka_as_aws
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text');
CREATE SINK s FROM raw INTO ICEBERG CATALOG lake (NAMESPACE = 'db', TABLE = 'raw') USING AWS CONNECTION k;
-- case: alter_text_source_refuses_schema
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'text');
ALTER SOURCE raw SET (SCHEMA = 'v STRING');
-- case: alter_kafka_source_schema_clash
CREATE SOURCE raw FROM KAFKA CONNECTION k (TOPIC = 'raw', FORMAT = 'json', SCHEMA = 'v STRING') INCLUDE OFFSET;
ALTER SOURCE raw SET (SCHEMA = 'v STRING, offset BIGINT');
-- case: source_topic_and_topics
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', TOPICS = ('orders', 'returns'), FORMAT = 'text');
-- case: source_topics_and_pattern
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'orders\..*', FORMAT = 'text', TOPICS = ('a'));
-- case: source_empty_topics
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = (), FORMAT = 'text');
-- case: source_topic_named_twice
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = ('orders', 'returns', 'orders'), FORMAT = 'text');
-- case: source_topics_with_blank
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = ('orders', 'my returns'), FORMAT = 'text');
-- case: source_pattern_does_not_compile
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'orders\.(eu|us', FORMAT = 'text');
-- case: source_pattern_written_as_a_glob
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = '*.orders', FORMAT = 'text');
-- case: source_pattern_java_quoting
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'db\Q.inventory.\E.*', FORMAT = 'text');
-- case: source_pattern_java_property_class
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'orders_\p{Lower}+', FORMAT = 'text');
-- case: source_pattern_java_class_intersection
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'orders_[a-z&&[^x]]', FORMAT = 'text');
-- case: source_pattern_empty
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = '', FORMAT = 'text');
-- case: source_refresh_with_one_topic
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text', TOPIC METADATA REFRESH INTERVAL = '5s');
-- case: source_refresh_not_positive
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = ('a', 'b'), FORMAT = 'text', TOPIC REFRESH = 0);
-- case: source_many_topics_value_has_a_topic_column
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = ('a', 'b'), FORMAT = 'json', SCHEMA = 'id BIGINT, topic STRING');
-- case: source_include_topic_twice
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC PATTERN = 'a.*', FORMAT = 'text') INCLUDE TOPIC, OFFSET, TOPIC AS t;
