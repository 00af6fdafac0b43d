-- The guard (MySQL, MariaDB): checks a token against the resource's
-- high-water and raises it when accepted. ? = resource, seq, holder, lock.
-- {{table}} is the quoted table name.
--
-- The INSERT takes the row's exclusive lock (or inserts the row, locked),
-- held until the transaction ends, so concurrent guards of one resource run
-- one after another. On a duplicate, every assignment repeats the
-- acceptance rule:
--
--   the row is bound to no lock or to the token's lock, and
--   the token's seq is higher, or equal with the same holder.
--
-- MySQL evaluates the assignments left to right, each seeing the ones
-- before it (MariaDB too, unless sql_mode has SIMULTANEOUS_ASSIGNMENT, in
-- which case all see the old row). In the order lock_key, holder, seq,
-- updated_at, the rule stays true after each assignment when the token is
-- accepted, and nothing changes when it is not, so both orders give the
-- same result.
--
-- Affected rows: 1 inserted (accepted), 2 updated (accepted), and 0 or,
-- with CLIENT_FOUND_ROWS, 1 when the row was left as it was: refused, or
-- accepted again within the same microsecond. Only 2 is conclusive; for
-- the rest the verifier reads the locked row (check.sql).
INSERT INTO {{table}} (resource, seq, holder, lock_key, updated_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
    lock_key = IF((lock_key IS NULL OR lock_key = VALUES(lock_key))
                  AND (VALUES(seq) > seq OR (VALUES(seq) = seq AND VALUES(holder) = holder)),
                  VALUES(lock_key), lock_key),
    holder = IF((lock_key IS NULL OR lock_key = VALUES(lock_key))
                AND (VALUES(seq) > seq OR (VALUES(seq) = seq AND VALUES(holder) = holder)),
                VALUES(holder), holder),
    seq = IF((lock_key IS NULL OR lock_key = VALUES(lock_key))
             AND (VALUES(seq) > seq OR (VALUES(seq) = seq AND VALUES(holder) = holder)),
             VALUES(seq), seq),
    updated_at = IF((lock_key IS NULL OR lock_key = VALUES(lock_key))
                    AND (VALUES(seq) > seq OR (VALUES(seq) = seq AND VALUES(holder) = holder)),
                    VALUES(updated_at), updated_at)
