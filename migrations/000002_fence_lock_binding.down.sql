-- Rows moved to another lock and not written since (seq 0) cannot be kept
-- under the old constraint.
DELETE FROM fence_tokens WHERE seq = 0;
ALTER TABLE fence_tokens DROP CONSTRAINT IF EXISTS fence_tokens_seq_check;
ALTER TABLE fence_tokens ADD CONSTRAINT fence_tokens_seq_check CHECK (seq BETWEEN 1 AND 9007199254740991);
ALTER TABLE fence_tokens DROP COLUMN IF EXISTS lock_key;
