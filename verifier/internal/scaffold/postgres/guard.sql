-- The PostgreSQL guard, run by pgverifier (pgx) and by sqlverifier's
-- Postgres dialect (database/sql): one statement that checks a token
-- against the resource's high-water and raises it when accepted.
-- $1 resource, $2 seq, $3 holder, $4 the token's lock. {{table}} is the
-- quoted table name.
--
-- Accepted: a row comes back. Refused (a token of another lock than the
-- one the resource is bound to, or a stale one): the WHERE is false,
-- nothing is updated and no row comes back. Either way the conflicting row
-- is locked until the transaction ends, so under READ COMMITTED concurrent
-- guards on one resource run one after another and each sees the latest
-- high-water. A row without a lock (written before migration 000002)
-- adopts the lock of the first token it accepts.
INSERT INTO {{table}} AS f (resource, seq, holder, lock_key, updated_at)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (resource) DO UPDATE
    SET seq = excluded.seq, holder = excluded.holder, lock_key = excluded.lock_key,
        updated_at = excluded.updated_at
    WHERE (f.lock_key IS NULL OR f.lock_key = excluded.lock_key)
      AND (excluded.seq > f.seq OR (excluded.seq = f.seq AND excluded.holder = f.holder))
RETURNING seq
