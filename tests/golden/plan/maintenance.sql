CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'order_id BIGINT, sku STRING');

-- case: maintenance_options
CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') KEY (order_id)
WITH (COMPACTION = 'off', SNAPSHOT RETENTION = '6h', KEEP SNAPSHOTS = 100, ORPHAN FILE AGE = '3 days',
      COMPACTION MINIMUM FILES = 4, MAXIMUM DELETE FILES = 20, MAXIMUM MANIFESTS = 64);
-- case: maintenance_off_then_reset
CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders')
WITH (MAINTENANCE = 'off', ORPHAN FILE AGE = '10m');
ALTER SINK s RESET (MAINTENANCE, ORPHAN FILE AGE);
-- case: delete_mode_equality
CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders') KEY (order_id)
WITH (DELETE MODE = 'equality');
-- case: schema_evolution_off
CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'sales', TABLE = 'orders')
WITH (SCHEMA EVOLUTION = 'off');
