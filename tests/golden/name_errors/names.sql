-- Unknown names answered by the session before Spark starts (tests/test_session_names.py).
-- Besides these objects, the harness creates through pyiceberg, in connection lake: the tables
-- analytics.events and analytics.users, and the namespace sales (with no table).
-- A case named ok_... expects no error: what the statement gives ("ok: ...", its first rows).
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = 'wh');
CREATE CONNECTION warehouse TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = 'wh2');
CREATE CONNECTION s3 TO AWS (REGION = 'us-east-1') WITH (VALIDATE = false);
CREATE SOURCE events FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT, payload STRUCT<kind: STRING>');
CREATE VIEW recent AS SELECT * FROM events;

-- case: select_unknown_connection
SELECT count(*) FROM nolake.analytics.events

-- case: select_unknown_connection_nothing_close
SELECT *
  FROM elsewhere.analytics.events

-- case: select_unknown_namespace
SELECT * FROM lake.analytix.events

-- case: select_unknown_table
SELECT * FROM lake.analytics.evnts

-- case: select_table_in_empty_namespace
SELECT * FROM lake.sales.orders

-- case: select_unknown_table_time_travel
SELECT * FROM lake.analytics.evnts FOR VERSION AS OF 1

-- case: select_unknown_table_beside_a_source
SELECT * FROM events JOIN lake.analytics.evnt USING (id)

-- case: select_unknown_source
SELECT * FROM evnts

-- case: select_unknown_view_in_a_subquery
SELECT * FROM events e JOIN (SELECT id FROM recnt) r ON e.id = r.id

-- case: select_unknown_source_in_a_cte
WITH c AS (SELECT * FROM evnts) SELECT * FROM c

-- case: select_table_without_namespace
SELECT * FROM lake.events

-- case: select_from_an_aws_connection
SELECT * FROM s3.analytics.events

-- case: explain_select_unknown_connection
EXPLAIN SELECT * FROM lak.analytics.events

-- case: explain_select_unknown_table
EXPLAIN SELECT * FROM lake.analytics.user

-- case: describe_unknown_connection
DESCRIBE nolake.analytics.events

-- case: describe_unknown_namespace
DESCRIBE lake.analytix.events

-- case: describe_unknown_table
DESCRIBE lake.analytics.evnts

-- case: describe_unknown_object
DESCRIBE evnts

-- case: show_tables_in_unknown_namespace
SHOW TABLES IN lake.analytix

-- case: ok_show_tables
SHOW TABLES IN lake.analytics

-- case: sink_from_unknown_source
CREATE SINK k FROM evnts INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')

-- case: sink_from_unknown_connection
CREATE SINK k FROM nolake.analytics.events INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')

-- case: sink_from_a_connection_table
CREATE SINK k FROM lake.analytics.events INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')

-- case: explain_sink_from_unknown_view
EXPLAIN CREATE SINK k FROM recnt INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')

-- case: view_over_unknown_source
CREATE VIEW v2 AS
  SELECT id FROM evnts WHERE id > 0

-- case: view_over_unknown_connection
CREATE VIEW v2 AS SELECT * FROM nolake.analytics.events

-- case: view_over_a_connection_table
CREATE VIEW v2 AS SELECT * FROM lake.analytics.events

-- case: ok_view_over_a_view_and_a_cte
CREATE VIEW v3 AS WITH r AS (SELECT * FROM recent) SELECT * FROM r JOIN events USING (id)

-- case: ok_sink_from_a_view_the_script_created
CREATE VIEW later AS SELECT * FROM events;
EXPLAIN CREATE SINK k FROM later INTO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b')

-- case: ok_cte_and_table_function
EXPLAIN WITH c AS (SELECT 1 AS id) SELECT * FROM c JOIN range(3) r ON c.id = r.id

-- case: ok_struct_field_of_an_alias
EXPLAIN SELECT e.payload.kind FROM events e

-- case: ok_alias_in_a_hint
EXPLAIN SELECT /*+ BROADCAST(r) */ e.id FROM events e JOIN recent r ON e.id = r.id

-- case: ok_spark_catalog_and_files
EXPLAIN SELECT * FROM spark_catalog.default.t JOIN parquet.`/tmp/x.parquet` USING (id)

-- case: ok_quoted_and_mixed_case
EXPLAIN SELECT * FROM LAKE.Analytics.EVENTS JOIN `events` USING (id)

-- case: ok_connection_table
EXPLAIN SELECT * FROM lake.analytics.users
