-- The high-water of one resource and the lock it is bound to ('' if none).
-- $1 resource.
SELECT seq, holder, coalesce(lock_key, '') FROM {{table}} WHERE resource = $1
