CREATE SECRET sk AS 'SK';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk, REGION = 'eu-west-1');
CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'order_id BIGINT, sku STRING, amount DECIMAL(10,2), region STRING, ts TIMESTAMP, d DATE, flag BOOLEAN, price DOUBLE, tags ARRAY<STRING>');
CREATE VIEW big AS SELECT * FROM orders WHERE amount > 100;

-- case: design_doc_form
CREATE SINK iceberg_sink
FROM orders
TO ICEBERG CATALOG cat
USING AWS CONNECTION s3
NAMESPACE "namespace_name" TABLE "table_name"
WITH (
    FORMAT = 'parquet',
    MINIMUM SIZE = '1MiB',
    MAXIMUM PERIOD = '10s',
);
-- case: materialize_form_upsert
CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'sales', TABLE = 'orders')
USING AWS CONNECTION s3 KEY (order_id) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '60s');
-- case: key_without_mode_defaults_to_upsert
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'a.b', TABLE = 't') KEY (ORDER_ID, region);
-- case: append_default
CREATE SINK s FROM big TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'big');
-- case: spark_table_relation_warns
CREATE SINK s FROM spark_db.events TO ICEBERG CATALOG cat (NAMESPACE = 'raw', TABLE = 'events') MODE APPEND;
-- case: unknown_relation_warns_with_did_you_mean
CREATE SINK s FROM order TO ICEBERG CATALOG cat (NAMESPACE = 'raw', TABLE = 'x');
-- case: all_transforms
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders')
PARTITION BY (day(ts), bucket(16, order_id), truncate(4, sku), region, year(d), void(price), identity(flag));
-- case: plural_transforms_and_column_first
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders')
PARTITION BY (hours(ts), months(d), bucket(order_id, 8), truncate(amount, 100));
-- case: partition_on_unknown_columns_static_only
CREATE SINK s FROM spark_db.events TO ICEBERG CATALOG cat (NAMESPACE = 'raw', TABLE = 'events') PARTITION BY (days(event_time), bucket(32, user_id));
-- case: upsert_partition_inside_key
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') KEY (order_id, region) MODE UPSERT
PARTITION BY (bucket(16, order_id), region, void(sku));
-- case: sizes_and_durations
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (
    MINIMUM SIZE = '64 MB', MAXIMUM PERIOD = '5 minutes', MAXIMUM FILE SIZE = '1GiB', FORMAT VERSION = 2,
    PROPERTIES = ('write.parquet.compression-codec' = 'zstd', 'commit.retry.num-retries' = 8), ON ERROR = 'skip'
);
-- case: compound_duration_and_bare_numbers
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (
    MAXIMUM PERIOD = '1h 30m', MINIMUM SIZE = 1048576, MAXIMUM FILE SIZE = '1KiB'
);
-- case: bare_number_period_is_seconds
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (MAXIMUM PERIOD = 30);
-- case: short_period_warns
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (MAXIMUM PERIOD = '250ms');
-- case: if_not_exists
CREATE SINK IF NOT EXISTS s FROM orders TO ICEBERG CATALOG cat NAMESPACE sales TABLE orders;
-- case: explain
EXPLAIN CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') KEY (order_id) PARTITION BY (bucket(4, order_id));
-- case: alter_sink_set
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (MINIMUM SIZE = '1MiB');
ALTER SINK s SET (MAXIMUM PERIOD = '1m', MAXIMUM FILE SIZE = '128MiB');
-- case: alter_sink_commit_interval_alias
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders');
ALTER SINK s SET (COMMIT INTERVAL = '2s');
-- case: alter_sink_reset
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (MINIMUM SIZE = '1MiB', MAXIMUM PERIOD = '5s', MAXIMUM FILE SIZE = '1MiB');
ALTER SINK s RESET (MINIMUM SIZE, MAXIMUM FILE SIZE);
-- case: dead_letters_default_table
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (ON ERROR = 'dead-letter');
-- case: dead_letters_named_table
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (ON ERROR = 'dead-letter', DEAD LETTER TABLE = 'errors');
-- case: format_orc_with_option
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (FORMAT = 'orc');
-- case: format_avro_any_case
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') WITH (FORMAT = 'AVRO', MAXIMUM PERIOD = '10s');
-- case: format_clause_materialize_spelling
CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'sales', TABLE = 'orders')
KEY (order_id) MODE UPSERT FORMAT ORC WITH (COMMIT INTERVAL = '60s');
-- case: format_clause_string
CREATE SINK s FROM orders TO ICEBERG CATALOG cat NAMESPACE sales TABLE orders FORMAT 'avro';
-- case: explain_format
EXPLAIN CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') FORMAT ORC;
-- case: alter_sink_keeps_format
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') FORMAT avro;
ALTER SINK s SET (MAXIMUM PERIOD = '1m');
