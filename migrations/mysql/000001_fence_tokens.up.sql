-- fence_tokens holds, for every fenced resource, the lock it belongs to
-- (lock_key, the fence.Token.Key of the first token it accepted) and its
-- high-water: the highest fencing token (seq, holder) it has accepted.
-- sqlverifier's MySQL guard is an INSERT ... ON DUPLICATE KEY UPDATE on
-- this table. This is the MySQL/MariaDB form of the PostgreSQL files 000001
-- and 000002; seq 0 and holder '' mean "moved to lock_key, no token yet".
--
-- Names are compared byte for byte: resource, holder and lock_key are
-- VARBINARY, because the _bin collations of MariaDB pad with spaces ('a'
-- and 'a ' would be one resource) and a utf8mb4 VARCHAR(1024) key would
-- take 4096 bytes, above InnoDB's 3072-byte index key limit. The verifier
-- checks that resource names are UTF-8 (up to 1024 bytes); the primary key
-- is 1024 bytes.
--
-- One statement per file part, each ending with ";" at the end of a line:
-- migrations.ApplySQL splits there (the driver runs one statement at a
-- time unless the DSN has multiStatements=true).
CREATE TABLE IF NOT EXISTS fence_tokens (
    resource   VARBINARY(1024) NOT NULL,
    seq        BIGINT UNSIGNED NOT NULL,
    holder     VARBINARY(64)   NOT NULL,
    lock_key   VARBINARY(512)  NULL,
    updated_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (resource),
    CONSTRAINT fence_tokens_seq_check CHECK (seq BETWEEN 0 AND 9007199254740991)
) ENGINE=InnoDB;
