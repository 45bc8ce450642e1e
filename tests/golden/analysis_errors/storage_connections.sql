CREATE SECRET sa_json AS '{"type": "service_account"}';
CREATE SECRET azure_key AS 'a2V5';
CREATE SECRET sk AS 'SK';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk);
CREATE CONNECTION gcs TO GCS (PROJECT = 'my-project', CREDENTIALS = SECRET sa_json);
CREATE CONNECTION blob TO AZURE (ACCOUNT NAME = 'devstoreaccount1', ACCOUNT KEY = SECRET azure_key);
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '/wh');
CREATE CONNECTION k TO KAFKA (BROKER = 'localhost:9092');
CREATE SOURCE orders FROM GENERATOR (ROWS PER SECOND = 10, SCHEMA = 'id BIGINT, v STRING');

-- case: gcs_unknown_option_did_you_mean
CREATE CONNECTION g TO GCS (PROJEKT = 'my-project');
-- case: gcs_unknown_option_value_masked
CREATE CONNECTION g TO GCS (KEY FILE = '{"private_key": "hunter2"}');
-- case: gcs_empty_project
CREATE CONNECTION g TO GCS (PROJECT = ' ');
-- case: gcs_endpoint_not_a_url
CREATE CONNECTION g TO GCS (ENDPOINT = '127.0.0.1:4443');
-- case: gcs_credentials_bare_identifier
CREATE CONNECTION g TO GCS (CREDENTIALS = sa_json);
-- case: gcs_credentials_unknown_secret
CREATE CONNECTION g TO GCS (CREDENTIALS = SECRET sa_jsn);
-- case: gcs_credentials_a_path_not_json
CREATE CONNECTION g TO GCS (CREDENTIALS = '/home/me/key.json');
-- case: gcs_error_line_masks_inline_credentials
CREATE CONNECTION g TO GCS (CREDENTIALS = '{"private_key": "hunter2"}', PROJECT = 5);
-- case: azure_needs_account_name
CREATE CONNECTION a TO AZURE (ACCOUNT KEY = SECRET azure_key);
-- case: azure_bad_account_name
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'My Account');
-- case: azure_upper_case_account_name
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'DevStoreAccount1');
-- case: azure_key_and_sas_token
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACCOUNT KEY = SECRET azure_key, SAS TOKEN = 'sv=1&sig=hunter2');
-- case: azure_sas_token_and_key
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', SAS TOKEN = SECRET azure_key, ACCOUNT KEY = 'hunter2');
-- case: azure_unknown_option_did_you_mean
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ACOUNT KEY = 'hunter2');
-- case: azure_endpoint_not_a_url
CREATE CONNECTION a TO AZURE (ACCOUNT NAME = 'acct', ENDPOINT = '127.0.0.1:10000');
-- case: catalog_gcs_connection_unknown
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', GCS CONNECTION = gsc);
-- case: catalog_gcs_connection_of_another_kind
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', GCS CONNECTION = blob);
-- case: catalog_azure_connection_names_a_kafka_connection
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///c.db', AZURE CONNECTION = k);
-- case: catalog_gcs_and_azure
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', GCS CONNECTION = gcs, AZURE CONNECTION = blob);
-- case: catalog_local_takes_no_gcs_connection
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', GCS CONNECTION = gcs);
-- case: catalog_s3tables_takes_no_azure_connection
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', WAREHOUSE = 'arn:aws:s3tables:us-east-1:1:bucket/b', AWS CONNECTION = s3, AZURE CONNECTION = blob);
-- case: catalog_warehouse_on_another_storage
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///c.db', WAREHOUSE = 's3://bucket/wh', GCS CONNECTION = gcs);
-- case: catalog_s3_connection_did_you_mean
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'glue', S3 CONNECTION = s3);
-- case: sink_using_gcs_unknown
CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING GCS CONNECTION gcss NAMESPACE ns TABLE t;
-- case: sink_using_azure_names_a_gcs_connection
CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING AZURE CONNECTION gcs NAMESPACE ns TABLE t;
-- case: sink_using_aws_names_an_azure_connection
CREATE SINK s FROM orders TO ICEBERG CATALOG lake USING AWS CONNECTION blob NAMESPACE ns TABLE t;
-- case: sink_catalog_is_a_gcs_connection
CREATE SINK s FROM orders TO ICEBERG CATALOG gcs NAMESPACE ns TABLE t;
-- case: files_gcs_connection_on_a_local_path
CREATE SOURCE f FROM FILES 'data/events/' (FORMAT = 'parquet', GCS CONNECTION = gcs);
-- case: files_gcs_connection_on_an_s3_path
CREATE SOURCE f FROM FILES 's3://bucket/events/' (FORMAT = 'parquet', GCS CONNECTION = gcs);
-- case: files_azure_connection_on_a_gs_path
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', AZURE CONNECTION = blob);
-- case: files_aws_connection_on_an_abfss_path
CREATE SOURCE f FROM FILES 'abfss://c@acct.dfs.core.windows.net/' (FORMAT = 'parquet', AWS CONNECTION = s3);
-- case: files_gcs_connection_of_another_kind
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', GCS CONNECTION = s3);
-- case: files_two_storage_connections
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', GCS CONNECTION = gcs, AZURE CONNECTION = blob);
-- case: files_adls_connection_did_you_mean
CREATE SOURCE f FROM FILES 'abfss://c@acct.dfs.core.windows.net/' (FORMAT = 'parquet', ADLS CONNECTION = blob);
-- case: generator_takes_no_gcs_connection
CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = 1, SCHEMA = 'id BIGINT', GCS CONNECTION = gcs);
-- case: files_archive_on_another_storage
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = 'abfss://c@acct.dfs.core.windows.net/archive/');
-- case: files_local_archive_of_a_gcs_source
CREATE SOURCE f FROM FILES 'gs://bucket/events/' (FORMAT = 'parquet', CLEAN SOURCE = 'archive', ARCHIVE DIRECTORY = '/data/archive/');
