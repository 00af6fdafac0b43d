-- Does the resource have a row? ? = resource. A consistent read: it never
-- waits for a lock.
SELECT 1 FROM {{table}} WHERE resource = ?
