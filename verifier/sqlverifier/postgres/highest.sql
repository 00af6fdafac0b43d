-- The high-water of one resource. $1 resource.
SELECT seq, holder FROM {{table}} WHERE resource = $1
