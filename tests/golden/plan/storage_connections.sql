CREATE SECRET sa_json AS '{"type": "service_account", "project_id": "p"}';
CREATE SECRET azure_key AS 'a2V5';
CREATE SECRET sas AS 'sv=2024-01-01&sig=abc';
CREATE SECRET sk AS 'SK';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk);
CREATE CONNECTION gcs TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json) WITH (VALIDATE = false);
CREATE CONNECTION blob TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET azure_key);
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/wh');
CREATE SOURCE orders FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT, v STRING');

-- case: gcs_every_option
CREATE CONNECTION g TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json, ENDPOINT = 'http://127.0.0.1:4443') WITH (VALIDATE = false);
-- case: gcs_default_chain
CREATE CONNECTION g TO GCS;
-- case: gcs_design_document_spellings
CREATE CONNECTION g TO GCS (PROJECT ID = "my-project", CREDENTIALS SECRET = sa_json, ENDPOINT URL = 'http://127.0.0.1:4443');
-- case: gcs_inline_credentials_hidden_with_a_warning
CREATE CONNECTION g TO GCS (CREDENTIALS = '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}');
-- case: azure_account_key
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET azure_key, ENDPOINT = 'http://127.0.0.1:10000/devstoreaccount1');
-- case: azure_sas_token
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'mystorageaccount', SAS TOKEN = SECRET sas);
-- case: azure_default_chain
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'mystorageaccount');
-- case: azure_inline_key_hidden_with_a_warning
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'mystorageaccount', ACCOUNT KEY = 'a2V5LXZhbHVl');
-- case: catalog_sql_on_gcs
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///catalog.db', WAREHOUSE = 'gs://bucket/wh', GCS CONNECTION = gcs);
-- case: catalog_rest_on_azure
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', WAREHOUSE = 'lakehouse', AZURE CONNECTION = blob);
-- case: catalog_hive_on_azure
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'hive', URI = 'thrift://metastore:9083', WAREHOUSE = 'abfss://wh@devstoreaccount1.dfs.core.windows.net/', AZURE CONNECTION = blob);
-- case: catalog_glue_with_aws_identity_on_gcs
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'glue', AWS CONNECTION = s3, GCS CONNECTION = gcs);
-- case: sink_using_gcs
CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING GCS CONNECTION gcs NAMESPACE ns TABLE t;
-- case: sink_using_azure
CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION lake (NAMESPACE = 'ns', TABLE = 't') USING AZURE CONNECTION blob;
-- case: files_on_gcs
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'json', SCHEMA = 'id BIGINT', GCS CONNECTION = gcs);
-- case: files_on_azure
CREATE SOURCE f FROM FILES 'abfss://c@devstoreaccount1.dfs.core.windows.net/events/' (FORMAT = 'parquet', AZURE CONNECTION = blob);
-- case: files_on_wasbs
CREATE SOURCE f FROM FILES 'wasbs://c@devstoreaccount1.blob.core.windows.net/events/' (FORMAT = 'parquet', AZURE CONNECTION = blob);
-- case: files_on_gcs_default_credentials
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet');
-- case: files_on_gcs_archived_on_gcs
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', GCS CONNECTION = gcs, CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 'gs://bucket/archive/');
