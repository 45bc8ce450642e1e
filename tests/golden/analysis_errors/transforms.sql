CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'order_id BIGINT, sku STRING, amount DECIMAL(10,2), region STRING, ts TIMESTAMP, ts_ntz TIMESTAMP_NTZ, d DATE, flag BOOLEAN, price DOUBLE, tags ARRAY<STRING>, ts_day INT, s STRUCT<a: INT>');

-- case: unknown_transform
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (dya(ts));
-- case: unknown_transform_no_suggestion
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (zorder(ts));
-- case: unknown_column
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (day(tss));
-- case: unknown_identity_column
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (regoin);
-- case: day_wrong_arity
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (day(ts, d));
-- case: day_number_argument
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (day(7));
-- case: bucket_one_argument
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(order_id));
-- case: bucket_two_columns
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(order_id, sku));
-- case: bucket_two_numbers
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (truncate(4, 5));
-- case: bucket_zero
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(0, order_id));
-- case: bucket_negative_column_first
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(order_id, -3));
-- case: bucket_too_large
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(2147483648, order_id));
-- case: truncate_fractional_width
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (truncate(2.5, sku));
-- case: day_on_string
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (day(sku));
-- case: hour_on_date
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (hours(d));
-- case: truncate_on_timestamp
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (truncate(4, ts));
-- case: bucket_on_double
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(8, price));
-- case: bucket_on_boolean
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(8, flag));
-- case: identity_on_array
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (tags);
-- case: identity_on_struct
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (identity(s));
-- case: two_time_transforms_one_column
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (year(ts), days(ts));
-- case: duplicate_field
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (region, identity(region));
-- case: duplicate_field_spellings
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(16, order_id), bucket(order_id, 16));
-- case: duplicate_generated_name
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(16, order_id), bucket(8, order_id));
-- case: generated_name_clashes_with_column
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (day(ts));
-- case: upsert_partition_outside_key
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (order_id) MODE UPSERT PARTITION BY (bucket(16, order_id), region);
-- case: static_checks_without_schema
CREATE SINK s FROM spark_db.events TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') PARTITION BY (bucket(0, id));
