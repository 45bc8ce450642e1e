-- case: files_json_schema
CREATE SOURCE events FROM FILES 'data/events/' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTAMP, v STRING');
-- case: files_csv_header_reader_options
CREATE SOURCE IF NOT EXISTS orders FROM FILES '/abs/orders/*.csv' (
    FORMAT = 'csv', SCHEMA = 'order_id INT, sku VARCHAR(20), amount DECIMAL(10,2), day DATE',
    HEADER = true, DELIMITER = ';', NULL VALUE = 'NA', ON ERROR = 'skip', MAX FILES PER TRIGGER = 10,
    OPTIONS = ('mode' = 'PERMISSIVE')
);
-- case: files_parquet_infers_schema
CREATE SOURCE p FROM FILES 's3a://bucket/p/' (FORMAT = 'parquet');
-- case: files_debezium_nested_schema
CREATE SOURCE cdc FROM FILES 'cdc' (FORMAT = 'debezium-json', SCHEMA = 'id BIGINT NOT NULL, s STRUCT<a: INT, b: ARRAY<STRING>>, m MAP<STRING, DOUBLE>, `weird name` LONG COMMENT ''x''');
-- case: files_format_as_identifier
CREATE SOURCE j FROM FILES 'j' (FORMAT = json, SCHEMA = 'a INTEGER, b BOOL, c TIMESTAMP_NTZ, d NUMERIC', MULTILINE = true);
-- case: generator
CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 1000, SCHEMA = 'id BIGINT, ts TIMESTAMP, region STRING');
-- case: generator_bounded
CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 10, TOTAL ROWS = 100, SCHEMA = 'id BIGINT');
-- case: view_depends_on_sources_and_views
CREATE SOURCE events FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT, kind STRING');
CREATE VIEW clicks AS SELECT * FROM events WHERE kind = 'click';
CREATE VIEW daily AS SELECT e.id, c.kind FROM Events e JOIN clicks c ON e.id = c.id -- events2
  WHERE e.kind <> 'daily' /* clicks */;
-- case: view_over_spark_table
CREATE VIEW IF NOT EXISTS v AS SELECT count(*) AS n FROM spark_db.events;
-- case: secret
CREATE SECRET IF NOT EXISTS pass AS 'hunter2';
-- case: alter_secret
CREATE SECRET pass AS 'a';
ALTER SECRET pass AS 'b';
-- case: alter_source_schema
CREATE SOURCE events FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT, kind STRING', ON ERROR = 'dead-letter');
ALTER SOURCE events SET (SCHEMA = 'id BIGINT, kind STRING, region STRING');
-- case: create_or_replace_view
CREATE SOURCE events FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT, kind STRING');
CREATE VIEW clicks AS SELECT * FROM events;
CREATE OR REPLACE VIEW clicks AS SELECT id, upper(kind) AS kind FROM events WHERE kind = 'click';
-- case: files_clean_source_archive_and_max_bytes
CREATE SOURCE drops FROM FILES '/landing/drops/' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING', MAX BYTES PER TRIGGER = '1GiB', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '/landing/archive/');
-- case: files_clean_source_delete
CREATE SOURCE drops FROM FILES 's3://landing/drops/' (FORMAT = 'parquet', CLEAN SOURCE = 'delete', MAX FILES PER TRIGGER = 100);
