CREATE SECRET sk AS 'SK';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk);
CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'order_id BIGINT, sku STRING, amount DECIMAL(10,2), region STRING, ts TIMESTAMP, ts_ntz TIMESTAMP_NTZ, d DATE, flag BOOLEAN, price DOUBLE, tags ARRAY<STRING>, ts_day INT');
CREATE SINK existing FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders');
CREATE SOURCE dbz FROM FILES 'cdc' (FORMAT = 'debezium-json');

-- case: unknown_catalog_connection
CREATE SINK s FROM orders TO ICEBERG CATALOG ca (NAMESPACE = 'n', TABLE = 't');
-- case: catalog_is_aws_connection
CREATE SINK s FROM orders TO ICEBERG CATALOG s3 (NAMESPACE = 'n', TABLE = 't');
-- case: using_aws_connection_unknown
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') USING AWS CONNECTION nope;
-- case: using_aws_connection_is_catalog
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') USING AWS CONNECTION cat;
-- case: no_target_table
CREATE SINK s FROM orders TO ICEBERG CATALOG cat;
-- case: both_target_forms
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') NAMESPACE "n" TABLE "t";
-- case: table_without_namespace
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (TABLE = 't');
-- case: namespace_without_table
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n');
-- case: namespace_empty_level
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'a..b', TABLE = 't');
-- case: dotted_table
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'a', TABLE = 'b.t');
-- case: unknown_catalog_option
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPCE = 'a', TABLE = 't');
-- case: key_column_missing
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (order_di) MODE UPSERT;
-- case: key_column_twice
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (order_id, ORDER_ID) MODE UPSERT;
-- case: key_column_nested
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (tags);
-- case: key_column_double
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (price);
-- case: upsert_needs_key
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') MODE UPSERT;
-- case: append_takes_no_key
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (order_id) MODE APPEND;
-- case: alter_reset_not_changeable
ALTER SINK existing RESET (MINIMUM SIZE, FORMAT);
-- case: format_unknown
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (FORMAT = 'parket');
-- case: format_unknown_nothing_close
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (FORMAT = 'csv');
-- case: format_clause_unknown
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') FORMAT ORK;
-- case: format_version_1
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (FORMAT VERSION = 1);
-- case: format_version_4
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (FORMAT VERSION = 4);
-- case: alter_format_version_4
ALTER SINK existing SET (FORMAT VERSION = 4);
-- case: alter_format_version_reset
ALTER SINK existing RESET (FORMAT VERSION);
-- case: size_unknown_unit
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MINIMUM SIZE = '10 MiBs');
-- case: size_not_a_size
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MINIMUM SIZE = 'large');
-- case: size_zero
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MINIMUM SIZE = '0MB');
-- case: file_size_too_small
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MAXIMUM FILE SIZE = '100B');
-- case: duration_unknown_unit
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MAXIMUM PERIOD = '10 fortnights');
-- case: duration_missing_unit_in_compound
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MAXIMUM PERIOD = '1m 30');
-- case: duration_too_short
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (COMMIT INTERVAL = '10ms');
-- case: period_and_commit_interval_twice
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MAXIMUM PERIOD = '10s', COMMIT INTERVAL = '10s');
-- case: properties_value_not_string
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (PROPERTIES = ('a' = SECRET sk));
-- case: properties_format_version
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (PROPERTIES = ('format-version' = '1'));
-- case: properties_write_format_default
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (PROPERTIES = ('write.format.default' = 'ORC'));
-- case: properties_write_format_default_with_format
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') FORMAT avro WITH (PROPERTIES = ('write.format.default' = 'x'));
-- case: unknown_with_option
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MINIMUM SIZ = '1MiB');
-- case: on_error_value
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (ON ERROR = 'retry');
-- case: alter_unknown_sink
ALTER SINK nope SET (MAXIMUM PERIOD = '1m');
-- case: alter_format_not_changeable
ALTER SINK existing SET (FORMAT = 'parquet');
-- case: alter_format_orc_not_changeable
ALTER SINK existing SET (FORMAT = 'orc');
-- case: alter_unknown_option
ALTER SINK existing SET (MAXIMUM PERIOS = '1m');
-- case: alter_bad_duration
ALTER SINK existing SET (MAXIMUM PERIOD = 'soon');
-- case: alter_reset_unknown
ALTER SINK existing RESET (MINIMUM SIZES);
-- case: explain_resolves_names
EXPLAIN CREATE SINK s FROM orders TO ICEBERG CATALOG nope (NAMESPACE = 'n', TABLE = 't');
-- case: dead_letter_table_without_dead_letter
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (ON ERROR = 'skip', DEAD LETTER TABLE = 'n.bad');
-- case: dead_letter_table_is_the_target
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (ON ERROR = 'dead-letter', DEAD LETTER TABLE = 't');
-- case: dead_letter_table_empty_level
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (ON ERROR = 'dead-letter', DEAD LETTER TABLE = 'n..bad');
-- case: routed_unknown_placeholder
CREATE SINK s FROM dbz INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 'cdc_{tabel}');
-- case: routed_dot_in_template
CREATE SINK s FROM dbz INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = '{db}.{table}');
-- case: routed_unbalanced_brace
CREATE SINK s FROM dbz INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = '{table');
-- case: routed_from_a_source_with_schema
CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = '{table}');
-- case: schemaless_debezium_into_one_table
CREATE SINK s FROM dbz INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't');
-- case: routed_append_with_key
CREATE SINK s FROM dbz INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = '{table}') KEY (id) MODE APPEND;
