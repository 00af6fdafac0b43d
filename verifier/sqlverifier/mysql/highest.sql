-- The high-water of one resource. ? = resource.
SELECT seq, holder FROM {{table}} WHERE resource = ?
