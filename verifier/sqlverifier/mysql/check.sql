-- The high-water and lock of one resource, read with a locking read. ? =
-- resource. A plain SELECT would read the transaction's REPEATABLE READ
-- snapshot, which can predate the row the guard just locked; FOR UPDATE
-- reads the latest committed row (the guard already holds its lock).
SELECT seq, holder, lock_key FROM {{table}} WHERE resource = ? FOR UPDATE
