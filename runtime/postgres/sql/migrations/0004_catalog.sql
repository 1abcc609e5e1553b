-- 0004: the service's tables: the playbook catalog (path, version, source, compiled program,
-- lint findings), the credential store (ciphertext only), the log of credential reads, and
-- per-execution variables, and the catalog entry each execution started through the API ran.
CREATE TABLE catalog (
    catalog_id  text PRIMARY KEY,
    path        text NOT NULL,
    version     integer NOT NULL,
    kind        text NOT NULL,
    digest      text NOT NULL,
    content     text NOT NULL,
    payload     json NOT NULL,
    program     bytea,
    findings    json NOT NULL,
    created_at  double precision NOT NULL,
    UNIQUE (path, version)
);
CREATE INDEX catalog_digest ON catalog (path, digest);

CREATE TABLE credentials (
    id          text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    type        text NOT NULL,
    data        bytea NOT NULL,
    meta        json,
    tags        json NOT NULL,
    description text,
    created_at  double precision NOT NULL,
    updated_at  double precision NOT NULL
);

CREATE TABLE credential_reads (
    read_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    credential_id text NOT NULL,
    name          text NOT NULL,
    who           text NOT NULL,
    execution_id  text,
    ts            double precision NOT NULL
);

CREATE TABLE execution_vars (
    execution_id  text NOT NULL,
    name          text NOT NULL,
    value         json NOT NULL,
    type          text NOT NULL,
    source_step   text,
    created_at    double precision NOT NULL,
    accessed_at   double precision,
    access_count  integer NOT NULL DEFAULT 0,
    PRIMARY KEY (execution_id, name)
);

CREATE TABLE api_executions (
    execution_id text PRIMARY KEY,
    catalog_id   text,
    path         text,
    version      integer
);
