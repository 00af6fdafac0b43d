//go:build unix

// Command fencelock runs a command under a fencelock lease, and inspects and
// advances locks, from the shell.
//
//	go install github.com/fencelock/fencelock/cmd/fencelock@latest
//
// Usage:
//
//	fencelock [--redis URL]... [--prefix P] run [--ttl D] [--wait D] [--grace D] NAME -- CMD [ARG...]
//	fencelock [--redis URL]... [--prefix P] inspect [--json] NAME
//	fencelock [--redis URL]... [--prefix P] advance [--json] NAME SEQ
//	fencelock [--redis URL]... [--prefix P] doctor [--json] [--ttl D] [--drift F] [--replica-ack N]
//	                                        [--clock-floor] [--name NAME] [--pings N] [--replicas=false]
//	fencelock help
//
// The global flags may also be given after the command name (before NAME).
//
// # run
//
// run takes lock NAME (ttl --ttl, default 30s) with a keep-alive that
// refreshes it every ttl/3, and runs CMD with the token in its environment:
//
//	FENCE_TOKEN   the token's text form, SEQ:HOLDER:KEY (fence.Parse reads it)
//	FENCE_KEY     the lock name
//	FENCE_SEQ     the token's Seq, in decimal
//	FENCE_HOLDER  the holder id
//
// Pass FENCE_TOKEN with every write to the protected storage and have the
// storage check it (package verifier): a lock alone cannot stop a paused
// holder. With --wait 0 (the default) run tries once; with --wait D it waits
// up to D for the lock, woken when the holder releases it.
//
// Stdin, stdout and stderr are the command's. The command runs in a process
// group of its own; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
// sent to fencelock are forwarded to that process group, as a terminal would
// deliver them. Since the command is not the terminal's foreground job, a
// command that reads from the terminal is stopped by the kernel (SIGTTIN):
// give it another stdin. On Linux the command also gets SIGTERM if fencelock
// itself dies. A terminating signal that arrives while run waits for the
// lock ends the wait, and run exits with 128+signal.
//
// When the lease is lost while the command runs (a refresh found the lock
// gone, or the lease's local deadline passed, for example because fencelock
// was paused), run sends SIGTERM to the command's process group, SIGKILL
// after --grace (default 10s), and exits with status 4. When the command
// exits, run releases the lock; a release that finds the lock already gone
// also means the lease was lost while the command ran (status 4).
//
// # inspect
//
// inspect prints the lock's holder, token, remaining ttl, counter (the last
// Seq issued) and the number of waiters: each waiting acquire subscribes to
// the lock's release channel, PREFIX{NAME}:release, so PUBSUB NUMSUB counts
// them (summed over the nodes of a Redis Cluster). With Redlock it prints
// the majority's view and one line per node; a redlock waiter subscribes on
// every node, so the waiters of the majority line is the largest per-node
// count. --json prints one JSON object instead.
//
// # advance
//
// advance lifts the lock's counter to at least SEQ (an atomic max) and
// prints the counter afterwards: the next token's Seq is greater. Use it
// when a verifier has seen a higher Seq than Redis remembers (after a Redis
// restart without persistence, a failover or an eviction).
//
// # doctor
//
// doctor checks the Redis deployment for what makes locks vanish or tokens
// go back, and prints each finding with its severity (info, warn, danger),
// the servers it holds for, its consequence and its fix; --json prints
// {"worst", "findings", "errors"} instead. The checks (package
// lease/doctor): the eviction policy, persistence, replication without
// replica acknowledgement, the servers' clocks against this host's, PING
// round trips, and on a Redis Cluster sharded pub/sub and the slot of a
// lock's keys (of lock --name, default "doctor"). The flags describe the
// leases that use the deployment, so the findings fit them: --ttl (default
// 30s) and --drift (default 0.01) give the drift allowance that clock skew
// and round trips are held against, --replica-ack N says the leases use
// lease.WithReplicaAck(N, ...), --clock-floor that they use
// lease.WithClockFloor(true). With several URLs (Redlock) each master is
// checked; so is every node of a Redis Cluster, and every replica that a
// primary lists unless --replicas=false (one that cannot be reached is a
// warn finding). doctor exits with status 4 when a finding is danger: a restart,
// failover or memory pressure can free a lock while its holder trusts its
// lease, or make tokens go back.
//
// # Redis
//
// --redis URL (repeatable, or several URLs separated by commas) or else the
// REDIS_URL environment variable; the default is redis://127.0.0.1:6379/0.
// One URL is one Redis deployment:
//
//	redis://[USER:PASS@]HOST[:PORT][/DB][?OPTIONS]     standalone (rediss:// for TLS)
//	unix://[USER:PASS@]/PATH/redis.sock[?db=DB]        standalone over a Unix socket
//	redis+cluster://[USER:PASS@]HOST:PORT[,HOST:PORT...][?OPTIONS]
//	                                                   Redis Cluster (rediss+cluster:// for TLS)
//	redis+sentinel://[USER:PASS@]HOST:PORT[,HOST:PORT...][/DB]?master_name=NAME[&password=P]
//	                                                   Sentinel; USER:PASS authenticate to the
//	                                                   sentinels, password= to the primary
//	                                                   (rediss+sentinel:// for TLS)
//
// OPTIONS are go-redis's query parameters (dial_timeout=2s, ...): see
// redis.ParseURL, redis.ParseClusterURL and redis.ParseFailoverURL. Several
// URLs (an odd number, at least 3) are independent masters for Redlock
// (package lease/redlock) with quorum fencing. Every client has go-redis's
// ContextTimeoutEnabled set; Redlock nodes also get MaxRetries -1 and
// DialerRetries 1 unless the URL sets them.
//
// --prefix sets the prefix of the lock's Redis keys and channel (default
// "fencelock:").
//
// # Exit status
//
//	0..255  run: the command's own exit status when it ran and the lease held
//	        (128+N when the command died of signal N)
//	0       inspect, advance, help: success; doctor: no danger finding
//	1       other errors: Redis unreachable, command not found, ...
//	2       usage error: bad flags or arguments (usage is printed to stderr)
//	3       run: the lock is held by another holder (it was not free within --wait)
//	4       run: the lease was lost while the command ran; the command's
//	        process group was sent SIGTERM (and SIGKILL after --grace) if
//	        it was still running (lost before the command started: it did
//	        not run)
//	4       doctor: a danger finding (a lock can vanish or tokens go back);
//	        1 when a server could not be checked and nothing was danger
//	128+N   run: fencelock got signal N while it waited for the lock
//
// A command's own status of 1 to 4 looks like fencelock's: fencelock's own
// failures are also reported on stderr, prefixed "fencelock: ".
package main
