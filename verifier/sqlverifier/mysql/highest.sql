-- The high-water of one resource and the lock it is bound to ('' if none).
-- ? = resource.
SELECT seq, holder, coalesce(lock_key, '') FROM {{table}} WHERE resource = ?
