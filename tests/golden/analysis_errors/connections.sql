CREATE SECRET sk AS 'SK';
CREATE SECRET pass AS 'hunter2';
CREATE CONNECTION s3 TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET sk);
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local');

-- case: aws_unknown_option_did_you_mean
CREATE CONNECTION a TO AWS (REGOIN = 'eu-west-1');
-- case: aws_duplicate_option
CREATE CONNECTION a TO AWS (REGION = 'eu-west-1', REGION = 'us-east-1');
-- case: aws_region_wrong_kind
CREATE CONNECTION a TO AWS (REGION = 5);
-- case: aws_key_id_without_secret_key
CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK');
-- case: aws_secret_key_without_key_id
CREATE CONNECTION a TO AWS (SECRET ACCESS KEY = SECRET sk);
-- case: aws_unknown_secret
CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = SECRET missing);
-- case: aws_secret_key_bare_identifier
CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = sk);
-- case: aws_session_token_without_keys
CREATE CONNECTION a TO AWS (SESSION TOKEN = SECRET sk);
-- case: aws_role_session_without_arn
CREATE CONNECTION a TO AWS (ASSUME ROLE SESSION NAME = 'x');
-- case: aws_bad_arn
CREATE CONNECTION a TO AWS (ASSUME ROLE ARN = 'role/writer');
-- case: aws_bad_endpoint
CREATE CONNECTION a TO AWS (ENDPOINT = '127.0.0.1:8333');
-- case: aws_validate_not_bool
CREATE CONNECTION a TO AWS () WITH (VALIDATE = 'maybe');
-- case: aws_unknown_with_option
CREATE CONNECTION a TO AWS () WITH (VALIDATED = true);
-- case: aws_error_line_masks_inline_secret
CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = 'wJalrXUtnFEMI/K7MDENG', REGION = 5);
-- case: catalog_missing_type
CREATE CONNECTION c TO ICEBERG CATALOG (URI = 'https://cat');
-- case: catalog_unknown_type
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'resst', URI = 'https://cat');
-- case: catalog_type_and_catalog_type_alias_twice
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', CATALOG TYPE = 'rest', URI = 'https://cat');
-- case: catalog_uri_and_url_twice
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://a', URL = 'https://b');
-- case: rest_needs_uri
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', WAREHOUSE = 'wh');
-- case: rest_uri_not_http
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'cat.example.com');
-- case: rest_user_without_password
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', USER = 'u');
-- case: rest_password_without_user
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', PASSWORD SECRET = pass);
-- case: rest_token_excludes_user
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', USER = 'u', PASSWORD = SECRET pass, TOKEN = SECRET pass);
-- case: rest_token_excludes_credential
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', CREDENTIAL = SECRET pass, TOKEN = SECRET pass);
-- case: rest_aws_connection_excludes_credential
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', CREDENTIAL = SECRET pass, AWS CONNECTION = s3);
-- case: rest_basic_needs_user
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', AUTH = 'basic');
-- case: rest_auth_unknown_value
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', AUTH = 'oauth');
-- case: rest_scope_without_oauth2
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', TOKEN = SECRET pass, SCOPE = 'all');
-- case: rest_password_secret_form_needs_name
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', USER = 'u', PASSWORD SECRET = 'pw');
-- case: rest_unknown_password_secret
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', USER = 'u', PASSWORD SECRET = passs);
-- case: s3tables_needs_warehouse
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', AWS CONNECTION = s3);
-- case: s3tables_needs_aws_connection
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tablesrest', WAREHOUSE = 'arn:aws:s3tables:us-east-1:1:bucket/b');
-- case: s3tables_user_does_not_apply
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', WAREHOUSE = 'wh', AWS CONNECTION = s3, USER = 'u', PASSWORD = SECRET pass);
-- case: local_uri_does_not_apply
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', URI = 'https://cat');
-- case: local_aws_connection_does_not_apply
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', AWS CONNECTION = s3);
-- case: sql_needs_uri
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql');
-- case: sql_uri_not_a_url
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'sql', URI = 'catalog.db');
-- case: aws_connection_unknown
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', WAREHOUSE = 'wh', AWS CONNECTION = s4);
-- case: aws_connection_wrong_kind
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 's3tables', WAREHOUSE = 'wh', AWS CONNECTION = lake);
-- case: properties_not_a_list
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', PROPERTIES = 'a=b');
-- case: properties_credential_refused
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'https://cat', PROPERTIES = ('s3.secret-access-key' = 'abcdef'));
-- case: properties_duplicate_key
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'local', PROPERTIES = ('a' = 'b', 'a' = 'c'));
-- case: reserved_name
CREATE CONNECTION "__inline__x" TO AWS ();
-- case: option_needs_value
CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI);
