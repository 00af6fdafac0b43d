// Command gcpause plays the scenario from Martin Kleppmann's "How to do
// distributed locking" (2016), end to end, twice:
//
//  1. Client 1 takes the lease on a file and gets a fencing token.
//  2. Client 1 pauses (a stop-the-world GC, say) for longer than the lease.
//  3. The lease expires; client 2 takes it, with a higher token, and writes.
//  4. Client 1 wakes up, still believing it holds the lease, and writes.
//
// Without a verifier, client 1's stale write overwrites client 2's: a lost
// update, although every client followed the locking protocol. With the
// Postgres verifier, the database rejects client 1's write because its
// token is older than one it has already accepted.
//
//	REDIS_URL=redis://localhost:6379/0 DATABASE_URL=postgres://localhost/mydb go run ./examples/gcpause
//
// It uses the Redis at REDIS_URL and the PostgreSQL at DATABASE_URL. Left
// unset, dev.go (not part of the example) starts throwaway servers.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

const (
	ttl   = 300 * time.Millisecond // the lease
	pause = 3 * ttl                // client 1's "GC pause"

	createFiles = `CREATE TABLE IF NOT EXISTS gcpause_files (name text PRIMARY KEY, content text NOT NULL)`
	writeFile   = `INSERT INTO gcpause_files (name, content) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET content = excluded.content`
	readFile = `SELECT content FROM gcpause_files WHERE name = $1`
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// writeFunc writes content to the file name with the writer's token.
type writeFunc func(ctx context.Context, name string, tok fence.Token, content string) error

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb, err := connectRedis(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return errors.New("DATABASE_URL is not set (e.g. postgres://user:pass@localhost:5432/mydb)")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, createFiles); err != nil {
		return err
	}
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}
	v, err := pgverifier.New(conn)
	if err != nil {
		return err
	}

	unfenced := func(ctx context.Context, name string, _ fence.Token, content string) error {
		_, err := conn.Exec(ctx, writeFile, name, content)
		return err
	}
	fenced := func(ctx context.Context, name string, tok fence.Token, content string) error {
		// The guard and the write in one transaction, in one round trip.
		_, err := v.Exec(ctx, name, tok, writeFile, name, content)
		return err
	}

	fmt.Printf("Lease ttl %v; client 1 will pause for %v.\n", ttl, pause)
	fmt.Println("\n=== 1. A lease alone (no verifier) ===")
	lost, err := scenario(ctx, locks, conn, "without", unfenced)
	if err != nil {
		return err
	}
	fmt.Println("\n=== 2. The same, with the Postgres verifier ===")
	kept, err := scenario(ctx, locks, conn, "with", fenced)
	if err != nil {
		return err
	}

	fmt.Println("\n=== Summary ===")
	fmt.Printf("without the verifier the file says %q: client 2's update is lost.\n", lost)
	fmt.Printf("with the verifier    the file says %q: the stale write was rejected by Postgres.\n", kept)
	return nil
}

// scenario plays the four steps and returns what the file holds at the end.
func scenario(ctx context.Context, locks *lease.Client, conn *pgx.Conn, run string, write writeFunc) (string, error) {
	// Names unique to this process, in case REDIS_URL/DATABASE_URL are shared.
	name := fmt.Sprintf("gcpause/%d/%s/report.txt", os.Getpid(), run)

	client1, err := locks.TryAcquire(ctx, name, ttl)
	if err != nil {
		return "", err
	}
	fmt.Printf("client 1 acquires the lease on %q: token %d\n", name, client1.Token().Seq)

	// Client 2 waits for the lease; it is free once client 1's ttl runs out.
	type acquired struct {
		l   *lease.Lease
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		l, err := locks.Acquire(ctx, name, 10*time.Second)
		got <- acquired{l, err}
	}()

	fmt.Printf("client 1 pauses (stop-the-world GC) ...\n")
	pauseStart := time.Now()
	a := <-got
	if a.err != nil {
		return "", a.err
	}
	client2 := a.l
	defer client2.Release(context.WithoutCancel(ctx))
	fmt.Printf("  %v later its lease has expired; client 2 acquires it: token %d\n",
		time.Since(pauseStart).Round(time.Millisecond), client2.Token().Seq)
	if err := write(ctx, name, client2.Token(), "written by client 2"); err != nil {
		return "", fmt.Errorf("client 2's write: %w", err)
	}
	fmt.Printf("  client 2 writes %q with token %d: accepted\n", "written by client 2", client2.Token().Seq)

	time.Sleep(time.Until(pauseStart.Add(pause)))
	fmt.Printf("client 1 wakes up after %v and, still believing it holds the lease, writes with token %d\n",
		time.Since(pauseStart).Round(time.Millisecond), client1.Token().Seq)
	err = write(ctx, name, client1.Token(), "written by client 1 (stale)")
	var stale *verifier.StaleError
	switch {
	case errors.As(err, &stale):
		fmt.Printf("  rejected: %v\n", err)
		fmt.Printf("  (client 1 learns that token %d is out of date; the file has seen %d)\n", stale.Token.Seq, stale.Highest)
	case err != nil:
		return "", fmt.Errorf("client 1's write: %w", err)
	default:
		fmt.Printf("  accepted: nothing checks the token, so the stale write lands on top of client 2's\n")
	}
	if err := client1.Release(ctx); errors.Is(err, lease.ErrLost) {
		fmt.Printf("client 1 releases: %v\n", err)
	}

	var content string
	if err := conn.QueryRow(ctx, readFile, name).Scan(&content); err != nil {
		return "", err
	}
	fmt.Printf("the file now says %q\n", content)
	return content, nil
}

// connectRedis returns a client for the Redis at url, set up as fencelock's
// README recommends, once it answers PING.
func connectRedis(ctx context.Context, url string) (*redis.Client, error) {
	if url == "" {
		return nil, errors.New("REDIS_URL is not set (e.g. redis://localhost:6379/0)")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true // context deadlines bound socket reads
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("REDIS_URL=%s: %w", url, err)
	}
	return rdb, nil
}
