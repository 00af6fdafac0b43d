-- Reset: set a resource's high-water and lock, whatever they were (an
-- operator's way back from a poisoned high-water). $1 resource, $2 seq,
-- $3 holder ('' for none), $4 lock. One row back.
INSERT INTO {{table}} AS f (resource, seq, holder, lock_key, updated_at)
VALUES ($1, $2, $3, $4, now())
ON CONFLICT (resource) DO UPDATE
    SET seq = excluded.seq, holder = excluded.holder, lock_key = excluded.lock_key,
        updated_at = excluded.updated_at
RETURNING seq
