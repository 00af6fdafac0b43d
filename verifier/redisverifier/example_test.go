package redisverifier_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

func ExampleVerifier_Set() {
	ctx := context.Background()
	v, err := redisverifier.New(rdb) // any redis.Scripter: *redis.Client, *redis.ClusterClient, ...
	if err != nil {
		panic(err)
	}

	fmt.Println(v.Set(ctx, "report", fence.Token{Key: "report", Seq: 2, Holder: "b"}, "report:body", "from b", time.Hour))
	err = v.Set(ctx, "report", fence.Token{Key: "report", Seq: 1, Holder: "a"}, "report:body", "from a", time.Hour)
	fmt.Println(errors.Is(err, verifier.ErrStale))
	fmt.Println(rdb.Get(ctx, "report:body").Val())
	// Output:
	// <nil>
	// true
	// from b
}

func ExampleVerifier_NewScript() {
	ctx := context.Background()
	v, err := redisverifier.New(rdb)
	if err != nil {
		panic(err)
	}
	// A fenced append that also records which token wrote last. The body is
	// a constant of the program; data travels in keys and args.
	appendEvent, err := v.NewScript(`
redis.call('HSET', KEYS[2], 'last_seq', FENCE_SEQ)
return redis.call('RPUSH', KEYS[1], ARGV[1])`)
	if err != nil {
		panic(err)
	}

	tok := fence.Token{Key: "events", Seq: 3, Holder: "w1"}
	n, err := appendEvent.Run(ctx, "events", tok, []string{"events:list", "events:meta"}, "started")
	fmt.Println(n, err)
	fmt.Println(rdb.HGet(ctx, "events:meta", "last_seq").Val())
	// Output:
	// 1 <nil>
	// 3
}
