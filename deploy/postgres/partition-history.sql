-- gpuprov: convert the scan-history tables (raw_bom, artifact, package) to range partitions
-- by month, on PostgreSQL 13 or later. docs/operations.md ("Partitioning") explains the plan;
-- tests/faults/test_partitions.py applies this file to a copy of a populated database, then
-- checks the service still works and `gpuprov db prune` drops whole partitions.
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/postgres/partition-history.sql
--
-- One transaction: it either converts the three tables or changes nothing. It takes each
-- table's ACCESS EXCLUSIVE lock while it copies the rows, so stop the API (or expect its
-- requests to wait, then answer 503) and rehearse on a copy first:
--   createdb -T gpuprov gpuprov_rehearsal   (or pg_dump | pg_restore)
--
-- Each table gets a column `stored_at timestamptz NOT NULL DEFAULT now()`, the partition key
-- (the service never writes it: the default is the ingest's transaction time), filled for the
-- existing rows from scan.received_at. Its primary key gains stored_at (PostgreSQL requires the
-- partition key in every unique constraint); its other indexes, foreign keys and sequences are
-- carried over under the same names. The `scan` table itself stays a plain table: it holds the
-- idempotency key (scan.dedup_key must stay unique across all time) and is what every other
-- table's foreign key refers to; it is a small part of the history's bytes (docs/benchmarks.md).
--
-- Partitions: <table>_pYYYYMM (UTC months) from the month of the oldest scan to 3 months ahead,
-- and <table>_pdefault for anything else. Run `SELECT gpuprov_ensure_partitions(3);` monthly
-- (`gpuprov db prune` runs it), so rows never land in the default partition.

BEGIN;

-- The month partition of one table starting at `month` (UTC), created when missing.
CREATE OR REPLACE FUNCTION gpuprov_month_partition(parent text, month date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    name text := parent || '_p' || to_char(month, 'YYYYMM');
BEGIN
    IF to_regclass(quote_ident(name)) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
        name, parent,
        month::timestamp AT TIME ZONE 'UTC',
        (month + interval '1 month')::timestamp AT TIME ZONE 'UTC'
    );
    RETURN true;
END
$$;

-- Partitions for this month and `months_ahead` more, for every partitioned history table;
-- returns how many were created.
CREATE OR REPLACE FUNCTION gpuprov_ensure_partitions(months_ahead int DEFAULT 3) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    t text;
    created int := 0;
    this_month date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
BEGIN
    FOREACH t IN ARRAY ARRAY['raw_bom', 'artifact', 'package'] LOOP
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(quote_ident(t))
        );
        FOR i IN 0..months_ahead LOOP
            IF gpuprov_month_partition(t, (this_month + make_interval(months => i))::date) THEN
                created := created + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN created;
END
$$;

-- Convert one table (a no-op when it is partitioned already).
CREATE OR REPLACE FUNCTION gpuprov_partition_history_table(t text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    old text := t || '_unpartitioned';
    rel regclass := to_regclass(quote_ident(t));
    r record;
    index_defs text[] := '{}';
    fk_defs text[] := '{}';
    fk_names text[] := '{}';
    owned text[] := '{}';
    pk_name text;
    pk_cols text;
    first_month date;
    last_month date := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months')::date;
    m date;
    before bigint;
    after bigint;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION 'no table %', t;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = rel) THEN
        RAISE NOTICE '% is partitioned already', t;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_index WHERE indrelid = rel AND indisunique AND NOT indisprimary)
    THEN
        RAISE EXCEPTION '% has a unique index besides its primary key: not handled here', t;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel AND attidentity <> '') THEN
        RAISE EXCEPTION '% has an identity column: not handled here', t;
    END IF;

    -- what to carry over, captured before anything is renamed
    SELECT c.conname, string_agg(quote_ident(a.attname), ', ' ORDER BY k.ord)
      INTO pk_name, pk_cols
      FROM pg_constraint c
      CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
     WHERE c.conrelid = rel AND c.contype = 'p'
     GROUP BY c.conname;
    FOR r IN SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS def
               FROM pg_index WHERE indrelid = rel AND NOT indisprimary LOOP
        index_defs := index_defs || r.def;
        EXECUTE format('ALTER INDEX %s RENAME TO %I', r.name, r.name || '_old');
    END LOOP;
    FOR r IN SELECT conname, pg_get_constraintdef(oid) AS def
               FROM pg_constraint WHERE conrelid = rel AND contype = 'f' LOOP
        fk_names := fk_names || r.conname::text;
        fk_defs := fk_defs || r.def;
        EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', t, r.conname, r.conname || '_old');
    END LOOP;
    IF pk_name IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', t, pk_name, pk_name || '_old');
    END IF;
    -- serial sequences survive the old table: the new one's defaults use them
    FOR r IN SELECT s.oid::regclass::text AS seq, a.attname AS col
               FROM pg_depend d
               JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
               JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
              WHERE d.refobjid = rel AND d.deptype = 'a' LOOP
        owned := owned || (r.seq || ' ' || quote_ident(r.col));
        EXECUTE format('ALTER SEQUENCE %s OWNED BY NONE', r.seq);
    END LOOP;

    EXECUTE format('ALTER TABLE %I RENAME TO %I', t, old);
    EXECUTE format(
        'CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE '
        'INCLUDING COMMENTS, stored_at timestamptz NOT NULL DEFAULT now()) '
        'PARTITION BY RANGE (stored_at)',
        t, old
    );
    SELECT date_trunc('month', min(received_at) AT TIME ZONE 'UTC')::date INTO first_month
      FROM scan;
    m := least(coalesce(first_month, last_month), last_month);
    WHILE m <= last_month LOOP
        PERFORM gpuprov_month_partition(t, m);
        m := (m + interval '1 month')::date;
    END LOOP;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t || '_pdefault', t);

    EXECUTE format(
        'INSERT INTO %I SELECT o.*, s.received_at FROM %I o JOIN scan s ON s.id = o.scan_id',
        t, old
    );
    EXECUTE format('SELECT count(*) FROM %I', old) INTO before;
    EXECUTE format('SELECT count(*) FROM %I', t) INTO after;
    IF before <> after THEN
        RAISE EXCEPTION '% rows of % copied: % expected', after, t, before;
    END IF;

    IF pk_name IS NOT NULL THEN
        EXECUTE format(
            'ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (%s, stored_at)', t, pk_name, pk_cols
        );
    END IF;
    FOR i IN 1..coalesce(array_length(index_defs, 1), 0) LOOP
        EXECUTE index_defs[i];  -- names the table `t`, now the partitioned one
    END LOOP;
    FOR i IN 1..coalesce(array_length(fk_defs, 1), 0) LOOP
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', t, fk_names[i], fk_defs[i]);
    END LOOP;
    EXECUTE format('DROP TABLE %I', old);
    FOR i IN 1..coalesce(array_length(owned, 1), 0) LOOP
        EXECUTE format(
            'ALTER SEQUENCE %s OWNED BY %I.%s',
            split_part(owned[i], ' ', 1), t, split_part(owned[i], ' ', 2)
        );
    END LOOP;
    EXECUTE format('ANALYZE %I', t);
END
$$;

SELECT gpuprov_partition_history_table('raw_bom');
SELECT gpuprov_partition_history_table('package');
SELECT gpuprov_partition_history_table('artifact');

COMMIT;
