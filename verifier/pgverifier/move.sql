-- Move: bind a resource to another lock and forget its high-water, if it
-- is bound to the lock it moves from, or to none. $1 resource, $2 from,
-- $3 to. A row comes back when it moved; none when the resource is bound to
-- a third lock (the row stays as it was, locked until the transaction ends).
INSERT INTO {{table}} AS f (resource, seq, holder, lock_key, updated_at)
VALUES ($1, 0, '', $3, now())
ON CONFLICT (resource) DO UPDATE
    SET seq = 0, holder = '', lock_key = excluded.lock_key, updated_at = excluded.updated_at
    WHERE f.lock_key IS NULL OR f.lock_key = $2::text
RETURNING seq
