CREATE SECRET pass AS 'p';
CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE gen FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT');
CREATE SINK k FROM gen TO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't');

-- case: drop_sink
DROP SINK k;
-- case: drop_if_exists_missing
DROP VIEW IF EXISTS nothing CASCADE;
-- case: drop_secret_restrict
DROP SECRET pass RESTRICT;
-- case: drop_connection_cascade
DROP CONNECTION cat CASCADE;
-- case: show_sinks
SHOW SINKS;
-- case: show_create_secret
SHOW CREATE SECRET pass;
-- case: show_create_source
SHOW CREATE SOURCE gen;
-- case: show_sink_status_all
SHOW SINK STATUS;
-- case: show_sink_status_one
SHOW SINK STATUS k;
-- case: describe_source
DESCRIBE gen;
-- case: validate_connection
VALIDATE CONNECTION cat;
-- case: flush_sink
FLUSH SINK k;
-- case: flush_all
FLUSH SINKS;
