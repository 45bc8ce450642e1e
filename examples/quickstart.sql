-- icesql quick start: stream JSON files from a directory into a partitioned Iceberg table
-- on the embedded default (a local SQLite catalog + a warehouse directory; no server).
--
--   icesql run examples/quickstart.sql --once
--
-- Relative paths resolve against this file's directory.

CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
    TYPE = 'local',
    WAREHOUSE = './warehouse'
);

CREATE SOURCE IF NOT EXISTS events
  FROM FILES 'data/events/'
  (FORMAT = 'json',
   SCHEMA = 'id BIGINT, ts TIMESTAMP, user_id INT, region STRING, amount DOUBLE, kind STRING');

CREATE SINK IF NOT EXISTS events_sink
FROM events
INTO ICEBERG CATALOG lake (NAMESPACE = 'analytics', TABLE = 'events')
PARTITION BY (day(ts), region)
WITH (MAXIMUM FILE SIZE = '128MiB');
