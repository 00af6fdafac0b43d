package main

// Not part of the example: when REDIS_URL or DATABASE_URL is unset, start a
// throwaway redis-server or PostgreSQL and run the example against it. Leave
// this file out when you copy main.go.

import "github.com/fencelock/fencelock/examples/internal/devserver"

func init() { devserver.Run(devserver.Redis, devserver.Postgres) }
