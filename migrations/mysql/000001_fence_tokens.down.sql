DROP TABLE IF EXISTS fence_tokens;
