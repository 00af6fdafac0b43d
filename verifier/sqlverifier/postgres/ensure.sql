-- Move, step 1: make sure the resource has a row, bound to no lock when it
-- is new. $1 resource. check.sql then locks it.
INSERT INTO {{table}} (resource, seq, holder, lock_key, updated_at)
VALUES ($1, 0, '', NULL, now())
ON CONFLICT (resource) DO NOTHING
