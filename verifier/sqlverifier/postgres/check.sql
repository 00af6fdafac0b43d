-- The high-water and lock of one resource, after the guard refused a token
-- or to move it. $1 resource. The guard locked the row; FOR UPDATE reads
-- its latest version (and locks it for Move).
SELECT seq, holder, lock_key FROM {{table}} WHERE resource = $1 FOR UPDATE
