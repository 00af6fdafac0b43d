-- The guard: one statement that checks a token against the resource's
-- high-water and raises it when accepted. $1 resource, $2 seq, $3 holder.
-- {{table}} is the quoted table name (pgx.Identifier.Sanitize).
--
-- Accepted: a row comes back. Rejected: the WHERE is false, nothing is
-- updated and no row comes back. Either way the conflicting row is locked
-- until the transaction ends, so under READ COMMITTED concurrent guards on
-- one resource run one after another and each sees the latest high-water.
INSERT INTO {{table}} AS f (resource, seq, holder, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (resource) DO UPDATE
    SET seq = excluded.seq, holder = excluded.holder, updated_at = excluded.updated_at
    WHERE excluded.seq > f.seq OR (excluded.seq = f.seq AND excluded.holder = f.holder)
RETURNING seq
