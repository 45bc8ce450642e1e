CREATE SECRET csr_pw AS 'hunter2-registry';
CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092') WITH (VALIDATE = false);
CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = 'http://localhost:8081') WITH (VALIDATE = false);
-- case: connection_needs_url
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (USERNAME = 'u', PASSWORD = SECRET csr_pw);
-- case: connection_url_not_http
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'localhost:8081');
-- case: connection_url_with_credentials
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'https://u:hunter2-registry@r:8081');
-- case: connection_username_without_password
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r:8081', USERNAME = 'u');
-- case: connection_unknown_option
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r:8081', TOPIC = 'x');
-- case: connection_password_not_a_secret
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r:8081', USERNAME = 'u', PASSWORD = 'hunter2-inline');
-- case: connection_unknown_secret
CREATE CONNECTION r2 TO CONFLUENT SCHEMA REGISTRY (URL = 'http://r:8081', USERNAME = 'u', PASSWORD = SECRET nope);
-- case: source_avro_without_registry
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders') FORMAT AVRO;
-- case: source_debezium_with_text
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders') FORMAT TEXT ENVELOPE DEBEZIUM;
-- case: source_registry_is_a_kafka_connection
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders') FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION k;
-- case: source_registry_unknown
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders') FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION crs;
-- case: source_registry_schema_given
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', SCHEMA = 'id BIGINT') FORMAT PROTOBUF USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;
-- case: source_record_strategy_needs_record_name
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'avro', SCHEMA REGISTRY = csr, SUBJECT NAME STRATEGY = 'record');
-- case: source_key_format_avro_without_registry
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'orders', FORMAT = 'text') KEY FORMAT AVRO ENVELOPE UPSERT;
-- case: source_many_topics_need_one_subject
CREATE SOURCE inventory FROM KAFKA CONNECTION k (TOPIC PATTERN = 'dbserver1\.inventory\..*')
    FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;
-- case: source_schema_per_topic_protobuf_not_built
CREATE SOURCE inventory FROM KAFKA CONNECTION k (TOPICS = ('a', 'b'))
    FORMAT PROTOBUF USING CONFLUENT SCHEMA REGISTRY CONNECTION csr ENVELOPE DEBEZIUM;
-- case: source_schema_per_topic_feeds_only_a_routed_sink
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/tmp/wh');
CREATE SOURCE inventory FROM KAFKA CONNECTION k (TOPIC PATTERN = 'dbserver1\.inventory\..*')
    FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr ENVELOPE DEBEZIUM;
CREATE SINK inv FROM inventory INTO ICEBERG CATALOG lake (NAMESPACE = 'inv', TABLE = 'customers') KEY (id) MODE UPSERT;
-- case: source_schema_per_topic_not_selected
CREATE SOURCE inventory FROM KAFKA CONNECTION k (TOPIC PATTERN = 'dbserver1\.inventory\..*')
    FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr ENVELOPE DEBEZIUM;
CREATE VIEW v AS SELECT * FROM inventory WHERE true;
-- case: source_many_topics_topic_record_strategy
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPICS = ('a', 'b'), SUBJECT NAME STRATEGY = 'topic_record',
    RECORD NAME = 'shop.Order') FORMAT AVRO USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;
