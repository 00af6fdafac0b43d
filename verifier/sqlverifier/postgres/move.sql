-- Move, step 3, once the locked row was found bound to the old lock or to
-- none: bind it to the new lock, with no high-water. $1 lock, $2 resource.
UPDATE {{table}} SET lock_key = $1, seq = 0, holder = '', updated_at = now() WHERE resource = $2
