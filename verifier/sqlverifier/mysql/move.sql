-- Move, step 3, once the locked row was found bound to the old lock or to
-- none: bind it to the new lock, with no high-water. ? = lock, resource.
UPDATE {{table}} SET lock_key = ?, seq = 0, holder = '', updated_at = UTC_TIMESTAMP(6) WHERE resource = ?
