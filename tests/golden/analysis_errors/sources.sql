-- case: files_needs_format
CREATE SOURCE s FROM FILES 'data' (SCHEMA = 'id BIGINT');
-- case: files_unknown_format
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'jsn', SCHEMA = 'id BIGINT');
-- case: files_json_needs_schema
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json');
-- case: files_header_only_csv
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = 'id BIGINT', HEADER = true);
-- case: files_on_error_value
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = 'id BIGINT', ON ERROR = 'ignore');
-- case: files_rows_per_second_generator_only
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'parquet', ROWS PER SECOND = 5);
-- case: schema_unknown_type
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = 'id BIGINT, ts TIMESTMP, v STRING');
-- case: schema_unclosed_struct
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'csv', SCHEMA = 'id BIGINT, s STRUCT<a: INT, b: STRING');
-- case: schema_duplicate_column
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'csv', SCHEMA = 'id BIGINT, ID INT');
-- case: schema_bad_decimal
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'csv', SCHEMA = 'd DECIMAL(50, 2)');
-- case: schema_escaped_quote_offsets
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'csv', SCHEMA = 'a STRING COMMENT ''it''''s'', b FLOT');
-- case: schema_multiline_literal
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = '
    id BIGINT,
    ts TIMESTAMP
    v STRING');
-- case: schema_empty
CREATE SOURCE s FROM FILES 'data' (FORMAT = 'json', SCHEMA = '');
-- case: generator_needs_rows_per_second
CREATE SOURCE g FROM GENERATOR (SCHEMA = 'id BIGINT');
-- case: generator_rows_per_second_positive
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 0, SCHEMA = 'id BIGINT');
-- case: generator_rows_per_second_integer
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1.5, SCHEMA = 'id BIGINT');
-- case: generator_needs_schema
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 10);
-- case: generator_format_does_not_apply
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT', FORMAT = 'json');
-- case: source_name_taken_by_view
CREATE VIEW v AS SELECT 1;
CREATE SOURCE v FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT');
-- case: alter_unknown_secret
ALTER SECRET nope AS 'x';
-- case: drop_unknown_source
CREATE SOURCE events FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT');
DROP SOURCE event;
-- case: show_create_unknown_view
SHOW CREATE VIEW nope;
-- case: validate_unknown_connection
VALIDATE CONNECTION nope;
-- case: describe_unknown
DESCRIBE nope;
-- case: flush_unknown_sink
FLUSH SINK nope;
-- case: alter_source_unknown
CREATE SOURCE events FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT');
ALTER SOURCE event SET (SCHEMA = 'id BIGINT, v STRING');
-- case: alter_source_generator
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id INT');
ALTER SOURCE g SET (SCHEMA = 'id BIGINT');
-- case: alter_source_other_option
CREATE SOURCE e FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT');
ALTER SOURCE e SET (FORMAT = 'csv');
-- case: alter_source_bad_schema
CREATE SOURCE e FROM FILES 'e' (FORMAT = 'json', SCHEMA = 'id BIGINT');
ALTER SOURCE e SET (SCHEMA = 'id BIGNT');
-- case: or_replace_and_if_not_exists
CREATE OR REPLACE VIEW IF NOT EXISTS v AS SELECT 1;
-- case: files_archive_needs_directory
CREATE SOURCE s FROM FILES '/landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', CLEAN SOURCE = 'archive');
-- case: files_archive_directory_is_the_source
CREATE SOURCE s FROM FILES '/landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '/landing/in');
-- case: files_clean_source_value
CREATE SOURCE s FROM FILES '/landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', CLEAN SOURCE = 'remove');
-- case: files_both_limits_per_trigger
CREATE SOURCE s FROM FILES '/landing/in/' (FORMAT = 'json', SCHEMA = 'id BIGINT', MAX FILES PER TRIGGER = 5, MAX BYTES PER TRIGGER = '1GiB');
