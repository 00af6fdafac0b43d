-- Create the resource's row, bound to no lock and with no high-water (the
-- same as no row), committed on its own before any transaction guards the
-- resource. ? = resource.
--
-- Why: when the guard's INSERT creates the row inside a transaction that
-- then rolls back, InnoDB turns the waiting guards' record locks into gap
-- locks, and their retried inserts deadlock each other (error 1213). With
-- the row already there, the guard only ever locks an existing record.
INSERT INTO {{table}} (resource, seq, holder, lock_key, updated_at)
VALUES (?, 0, '', NULL, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE seq = seq
