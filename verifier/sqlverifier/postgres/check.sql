-- Move, step 2: the high-water and lock of one resource, locked. $1
-- resource. ensure.sql made the row; FOR UPDATE locks it for the rewrite.
SELECT seq, holder, lock_key FROM {{table}} WHERE resource = $1 FOR UPDATE
