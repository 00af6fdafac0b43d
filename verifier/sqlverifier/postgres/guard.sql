-- The guard (PostgreSQL): one statement that checks a token against the
-- resource's high-water and raises it when accepted. $1 resource, $2 seq,
-- $3 holder, $4 lock. {{table}} is the quoted table name.
--
-- Accepted: a row comes back. Refused (a foreign lock, or the seq rule):
-- the WHERE is false, nothing is updated and no row comes back. Either way
-- the conflicting row is locked until the transaction ends, so under READ
-- COMMITTED concurrent guards on one resource run one after another and
-- each sees the latest high-water. A row with no lock_key (written before
-- migration 000002) takes the token's lock.
INSERT INTO {{table}} AS f (resource, seq, holder, lock_key, updated_at)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (resource) DO UPDATE
    SET lock_key = excluded.lock_key, seq = excluded.seq, holder = excluded.holder, updated_at = excluded.updated_at
    WHERE (f.lock_key IS NULL OR f.lock_key = excluded.lock_key)
      AND (excluded.seq > f.seq OR (excluded.seq = f.seq AND excluded.holder = f.holder))
RETURNING seq
