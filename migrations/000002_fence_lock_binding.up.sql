-- Each resource belongs to one lock: lock_key is the lock (fence.Token.Key)
-- whose tokens the resource accepts. Rows written before this migration
-- have no lock_key; such a row adopts the lock of the next token it
-- accepts. seq may now be 0: a resource moved to another lock (Move) keeps
-- its binding with no high-water yet.
ALTER TABLE fence_tokens ADD COLUMN IF NOT EXISTS lock_key text;
ALTER TABLE fence_tokens DROP CONSTRAINT IF EXISTS fence_tokens_seq_check;
ALTER TABLE fence_tokens ADD CONSTRAINT fence_tokens_seq_check CHECK (seq BETWEEN 0 AND 9007199254740991);
