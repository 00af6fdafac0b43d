-- Bounds the session's idle time, a guarded transaction's included, to
-- {{seconds}}, an integer the verifier writes in (so that the statement
-- costs one round trip on the driver's default DSN): the server closes a
-- session idle that long, which rolls its transaction back (MySQL and
-- MariaDB read wait_timeout before each command). The session's own value
-- is kept in a user variable, for unbound.sql.
SET @fencelock_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = {{seconds}}
