module github.com/fencelock/fencelock/extra/fencegocron

go 1.26.0

// Development only: the core from this tree (see extra/fenceotel/go.mod).
replace github.com/fencelock/fencelock => ../../

require (
	github.com/fencelock/fencelock v0.1.0
	github.com/go-co-op/gocron/v2 v2.21.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
