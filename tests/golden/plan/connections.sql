CREATE SECRET aws_secret AS 'wJalrXUtnFEMI';
CREATE SECRET pass AS 'hunter2';
CREATE SECRET client_creds AS 'id:secret';
CREATE SECRET tok AS 'bearer-token';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AKIA1', SECRET ACCESS KEY = SECRET aws_secret, REGION = 'eu-west-1');

-- case: aws_keys_secret
CREATE CONNECTION aws1 TO AWS (
    ACCESS KEY ID = 'AKIAEXAMPLE',
    SECRET ACCESS KEY = SECRET aws_secret,
    REGION = 'eu-west-1',
    ENDPOINT = 'http://127.0.0.1:8333',
);
-- case: aws_design_doc_double_quoted_inline_secret
CREATE CONNECTION iceberg_s3_conn TO AWS (
    ACCESS KEY ID = "ABC123",
    SECRET ACCESS KEY = "....",
    REGION = "eu-west-1",
);
-- case: aws_inline_session_token
CREATE CONNECTION tmp TO AWS (ACCESS KEY ID = SECRET aws_secret, SECRET ACCESS KEY = SECRET aws_secret, SESSION TOKEN = 'tok123');
-- case: aws_default_chain
CREATE CONNECTION chain TO AWS () WITH (VALIDATE = false);
-- case: aws_assume_role
CREATE CONNECTION role TO AWS (ASSUME ROLE ARN = 'arn:aws:iam::123456789012:role/writer', ASSUME ROLE SESSION NAME = 'icesql');
-- case: aws_bare_validate_flag
CREATE CONNECTION flag TO AWS (REGION = 'us-west-2') WITH (VALIDATE);
-- case: rest_user_password_design_doc
CREATE CONNECTION iceberg_catalog_connection TO ICEBERG CATALOG (
    TYPE = 'rest',
    URI = 'https://my.awesome.cat:8081/api/catalog',
    USER = 'materialize',
    PASSWORD SECRET = pass,
);
-- case: rest_password_equals_secret
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat/api', USER = 'u', PASSWORD = SECRET pass);
-- case: rest_basic_auth
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat/api', USER = 'u', PASSWORD = SECRET pass, AUTH = 'basic');
-- case: rest_credential_materialize_spelling
CREATE CONNECTION c TO ICEBERG CATALOG (
    CATALOG TYPE = 'rest',
    URL = 'https://polaris:8181/api/catalog',
    WAREHOUSE = 'wh',
    CREDENTIAL = SECRET client_creds,
    OAUTH2 SERVER URL = 'https://polaris:8181/api/catalog/v1/oauth/tokens',
    SCOPE = 'PRINCIPAL_ROLE:ALL',
    ACCESS DELEGATION = 'vended-credentials'
);
-- case: rest_token
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat/api', TOKEN = SECRET tok);
-- case: rest_sigv4_through_aws_connection
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://127.0.0.1:8181', AWS CONNECTION = s3, WAREHOUSE = 'bucket');
-- case: rest_no_auth
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'REST', URI = 'http://localhost:8181');
-- case: rest_inline_password_warns
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat/api', USER = 'u', PASSWORD = 'p@ss');
-- case: s3tables_materialize_spelling
CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 's3tablesrest', URL = 'https://s3tables.eu-west-1.amazonaws.com/iceberg', WAREHOUSE = 'arn:aws:s3tables:eu-west-1:111122223333:bucket/b', AWS CONNECTION = s3);
-- case: s3table_design_doc_uri_defaulted_from_region
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3table', AWS CONNECTION = "s3", WAREHOUSE = 'arn:aws:s3tables:eu-west-1:111122223333:bucket/b');
-- case: s3tables_default_region
CREATE CONNECTION plain TO AWS ();
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', AWS CONNECTION = plain, WAREHOUSE = 'tb');
-- case: local_default_warehouse
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local');
-- case: local_relative_warehouse
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = 'data/../wh');
-- case: sql_sqlite_relative
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///cat.db', WAREHOUSE = 'wh');
-- case: sql_postgres
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'postgresql+psycopg://u@db/iceberg', WAREHOUSE = 's3://bucket/wh');
-- case: glue_with_aws
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'glue', AWS CONNECTION = s3, WAREHOUSE = 's3://bucket/wh');
-- case: hive
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'hive', URI = 'thrift://metastore:9083');
-- case: catalog_properties
CREATE CONNECTION IF NOT EXISTS c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', PROPERTIES = ('header.X-Iceberg-Access-Delegation' = 'vended-credentials', 'rest.signing-name' = 's3tables'));
