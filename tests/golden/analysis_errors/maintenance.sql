CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'order_id BIGINT, sku STRING');
CREATE SINK existing FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders');

-- case: compaction_value
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (COMPACTION = 'of');
-- case: compaction_minimum_files_too_small
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (COMPACTION MINIMUM FILES = 1);
-- case: keep_snapshots_zero
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (KEEP SNAPSHOTS = 0);
-- case: snapshot_retention_not_a_duration
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (SNAPSHOT RETENTION = 'a week');
-- case: orphan_file_age_too_short
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (ORPHAN FILE AGE = '30s');
-- case: misspelled_option
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (MAXIMUM MANIFEST = 10);
-- case: alter_maximum_delete_files_negative
ALTER SINK existing SET (MAXIMUM DELETE FILES = -1);
-- case: delete_mode_on_an_append_sink
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') WITH (DELETE MODE = 'equality');
-- case: delete_mode_unknown
CREATE SINK s FROM orders TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (order_id) WITH (DELETE MODE = 'vector');
