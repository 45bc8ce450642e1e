-- icesql upsert example: a Debezium change feed (JSON files) kept as the latest row per key.
--
--   icesql run examples/upsert.sql --once
--   icesql exec "SELECT * FROM lake.sales.orders ORDER BY order_id"
--
-- After both files: orders 1 (19.90), 3 (7.50) and 4 (6.25); order 2 was deleted.
-- Relative paths resolve against this file's directory.

CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (
    TYPE = 'local',
    WAREHOUSE = './warehouse'
);

CREATE SOURCE IF NOT EXISTS orders
  FROM FILES 'data/orders/'
  (FORMAT = 'debezium-json',
   SCHEMA = 'order_id BIGINT, ts TIMESTAMP, sku STRING, amount DECIMAL(10,2)');

CREATE SINK IF NOT EXISTS orders_sink
FROM orders
INTO ICEBERG CATALOG lake (NAMESPACE = 'sales', TABLE = 'orders')
KEY (order_id) MODE UPSERT
PARTITION BY (bucket(4, order_id))
WITH (COMMIT INTERVAL = '10s');
