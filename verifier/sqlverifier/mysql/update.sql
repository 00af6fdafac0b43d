-- The guard's fast path (MySQL, MariaDB), for a resource whose row exists
-- (the verifier creates it before the first guard; see ensure.sql): one
-- UPDATE of the row by primary key that checks the acceptance rule in its
-- WHERE and raises the high-water. ? = lock, holder, seq, resource, lock,
-- seq, seq, holder. {{table}} is the quoted table name.
--
-- 1 affected row: accepted (with or without CLIENT_FOUND_ROWS: the row
-- matched and, without it, changed, which updated_at makes certain but for
-- a repeat within one microsecond). 0: refused, a repeat within the same
-- microsecond, or no row; the verifier then runs guard.sql, which tells.
-- The UPDATE is a locking read of the latest committed row, so it never
-- accepts against an old snapshot.
UPDATE {{table}}
SET lock_key = ?, holder = ?, seq = ?, updated_at = UTC_TIMESTAMP(6)
WHERE resource = ?
  AND (lock_key IS NULL OR lock_key = ?)
  AND (seq < ? OR (seq = ? AND holder = ?))
