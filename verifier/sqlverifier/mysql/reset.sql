-- Reset: set a resource's high-water and lock, whatever they were (an
-- operator's way back from a poisoned high-water), committed on its own.
-- ? = resource, seq, holder ('' for none), lock.
INSERT INTO {{table}} (resource, seq, holder, lock_key, updated_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE seq = VALUES(seq), holder = VALUES(holder), lock_key = VALUES(lock_key),
    updated_at = VALUES(updated_at)
