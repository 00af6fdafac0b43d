-- fence_tokens holds the high-water of every fenced resource: the highest
-- fencing token (seq, holder) the resource has accepted. pgverifier's guard
-- is one INSERT ... ON CONFLICT (resource) DO UPDATE ... WHERE on this table.
CREATE TABLE IF NOT EXISTS fence_tokens (
    resource   text        PRIMARY KEY,
    seq        bigint      NOT NULL CHECK (seq BETWEEN 1 AND 9007199254740991),
    holder     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
