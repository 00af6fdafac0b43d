//go:build unix

// Command fencelock runs a command under a fencelock lease, and inspects and
// advances locks, from the shell.
//
//	go install github.com/fencelock/fencelock/cmd/fencelock@latest
//	export REDIS_URL=redis://redis.internal:6379/0   # in a crontab: REDIS_URL=... on its own line
//	fencelock run --ttl 30s nightly-report -- ./report.sh
//	fencelock inspect nightly-report
//
// Usage:
//
//	fencelock [--redis URL]... [--prefix P] [--timeout D] run [--ttl D] [--wait D] [--grace D] [--once-per D | --permits N] NAME -- CMD [ARG...]
//	fencelock [--redis URL]... [--prefix P] [--timeout D] inspect [--json] [--permits N] NAME
//	fencelock [--redis URL]... [--prefix P] [--timeout D] advance [--json] NAME SEQ
//	fencelock [--redis URL]... [--prefix P] doctor [--json] [--ttl D] [--drift F] [--replica-ack N]
//	                                        [--clock-floor] [--name NAME] [--pings N] [--replicas=false]
//	fencelock [--redis URL]... [--prefix P] [--timeout D] repair-counter [--yes] NAME
//	fencelock [--redis URL]... [--prefix P] [--timeout D] reset-highwater [--verifier URL] [--table T] [--hw-prefix P] [--rebind] [--yes] NAME RESOURCE
//	fencelock help [COMMAND]
//
// The global flags (and --tls-ca, --tls-cert, --tls-key: see "TLS") may
// also be given after the command name (before NAME).
// help, -h and --help print the usage to stdout. A usage error prints one
// line saying what is wrong and a hint, such as
//
//	fencelock: run: missing -- between NAME and the command
//	Run 'fencelock help run' (or -h) for usage.
//
// to stderr, and exits with status 2. There is no default Redis: run,
// inspect, advance and doctor given neither --redis nor REDIS_URL are such a
// usage error, and touch nothing (see "Redis").
//
// # run
//
// run takes lock NAME (ttl --ttl, default 30s) with a keep-alive that
// refreshes it every ttl/3, and runs CMD with the token in its environment
// (the shortest --ttl is 30ms: refreshes come at most every 10ms; on a busy
// machine a ttl under a few hundred milliseconds leaves them little room;
// the longest is 1h: a holder that crashed keeps the lock for its ttl, and
// the keep-alive makes a long command need no long ttl):
//
//	FENCE_TOKEN   the token's text form, SEQ:HOLDER:KEY (fence.Parse reads it)
//	FENCE_KEY     the lock name (the token's KEY; with --permits, NAME#SLOT)
//	FENCE_SEQ     the token's Seq, in decimal
//	FENCE_HOLDER  the holder id
//	FENCE_SLOT    with --permits only: the permit's slot, 0 to N-1
//
// Pass FENCE_TOKEN with every write to the protected storage and have the
// storage check it (package verifier): a lock alone cannot stop a paused
// holder. With --wait 0 (the default) run tries once, within --timeout;
// with --wait D it waits up to D for the lock, woken when the holder
// releases it (see "Time limits").
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
// The command must not run past the lease: once the lease's local deadline
// passes, the lock may pass to another holder. So when the keep-alive's
// refreshes fail (Redis unreachable or frozen) and the deadline draws near,
// run stops the command before it: SIGTERM to the command's process group
// when --grace plus a margin (100ms, at most ttl/10) is left before the
// deadline, and SIGKILL at the margin before the deadline. A healthy
// keep-alive keeps more than half the ttl ahead (only a failed refresh, or
// one slower than a sixth of the ttl, lets the deadline come closer), so
// --grace is shortened to ttl/2 minus the margin when it is longer (with
// the default --ttl 30s and --grace 10s it is not): with --ttl 3s, SIGTERM
// comes 1.5s and SIGKILL 0.1s before the deadline. run then exits with
// status 4, and says on stderr that the lease is being lost and when
// --grace was shortened.
//
// When the lease is lost at once while the command runs (a refresh found
// the lock gone or held by another: deleted, or lost in a Redis restart or
// failover; or the deadline passed while fencelock itself was paused), the
// lock may already have another holder. run sends SIGTERM to the command's
// process group and SIGKILL after the margin (or --grace, if shorter),
// exits with status 4, and says on stderr that --grace was
// shortened. When the command exits, run releases the lock; a
// release that finds the lock already gone also means the lease was lost
// while the command ran (status 4).
//
// run cannot stop the command while fencelock itself is paused (SIGSTOP, a
// frozen VM): the command runs on, the lease expires, another holder can
// take the lock, and the command gets SIGTERM only when fencelock resumes;
// it runs beside the next holder for as long as the pause outlasts the
// lease. What still protects the data then is the token at the storage:
// once the next holder's newer token has reached it, it refuses the paused
// holder's writes.
//
// With --once-per D, run runs the command at most once per period D, for
// cron on several hosts (package once): after taking the lock it claims the
// period under the lease's token, and exits 6 without running the command
// when a run completed less than D less D/10 ago (from that run's start, by
// the Redis server's clock: the hosts' clocks take no part). A command that
// exits 0 with the lease held completes the period before the release; a
// run whose lease passed to a newer holder cannot (status 4), and one that
// failed leaves the period open for the next run. It needs one Redis
// deployment (not Redlock).
//
// With --permits N (1 to 64), run takes a permit of the semaphore NAME of
// N permits (package lease, Client.Semaphore) instead of lock NAME, and
// runs the command as above: at most N commands of NAME run at once, and
// with --wait the others queue for the next permit, first come first
// served. Each permit is a slot (0 to N-1) with its own counter, so the
// command gets its slot's token, whose key is NAME#SLOT: a verifier
// refuses the writes of a holder whose slot passed to another. A run whose
// fencelock died frees its permit when its ttl ends. Give every run of
// NAME the same N. It needs one Redis deployment (not Redlock), and does
// not go with --once-per, which runs one command per period (status 2).
//
// # inspect
//
// inspect prints the lock's holder, token, remaining ttl, counter (the last
// Seq issued) and the number of waiters: each waiting acquire subscribes to
// the lock's release channel, PREFIX{NAME}:release, so PUBSUB NUMSUB counts
// them (summed over the nodes of a Redis Cluster). With Redlock it prints
// the majority's view and one line per node; a redlock waiter subscribes on
// every node, so the waiters of the majority line is the largest per-node
// count. --json prints one JSON object instead. A counter more than 24h
// above the server's clock is marked POISONED ("poisoned": true): see
// repair-counter.
//
// inspect --permits N prints the semaphore NAME of N permits instead: a
// line per held slot (holder, token, remaining ttl, the slot's counter), the
// queue's length and its first waiters' holder ids (--json: all of the
// first 100, and the N the last call left on the server, which a release
// goes by).
//
// # advance
//
// advance lifts the lock's counter to at least SEQ (an atomic max) and
// prints the counter afterwards: the next token's Seq is greater. Use it
// when a verifier has seen a higher Seq than Redis remembers (after a Redis
// restart without persistence, a failover or an eviction). A SEQ more than
// 24h above the server's clock (in µs) is refused: it would retire the lock.
//
// # reset-highwater
//
// reset-highwater is the way back from a poisoned high-water: a verifier
// trusts its callers, and a made-up token with the largest Seq (2^53-1)
// refuses every real holder of a resource for good. It reads lock NAME from
// Redis and sets RESOURCE's high-water, in the verifier's store (--verifier
// postgres://..., mysql://DSN or redis://..., or else the
// FENCELOCK_VERIFIER_URL environment variable, which keeps the store's
// password out of ps), to the holder's token if NAME
// is held, else to its counter with no holder ([verifier.Resetter]): the
// holder, and the next acquisition, are accepted; every older token, a
// paused holder's included, stays refused. It prints the high-water before
// and after, and changes it only with --yes, and only when it is above the
// lock's state. It refuses a lock with no counter on that Redis (a wrong
// --redis or --prefix). When the high-water is legitimate and Redis lost the
// counter, use advance instead: a reset would let tokens Redis issued before
// it forgot them in again.
//
// It also prints the lock RESOURCE is bound to. A forged token of another
// lock (Fence-Token: 1:evil:attacker-lock, sent to a new resource) binds the
// resource to that lock, and every real holder is refused as foreign;
// reset-highwater then refuses (status 1) unless --rebind is given, which
// binds RESOURCE to NAME as part of the reset. Use --rebind only when the
// other binding is forged or the resource moved to NAME for good.
//
// # repair-counter
//
// repair-counter lowers a poisoned counter: one more than 24h above the
// server's clock (TIME, in microseconds, the clock floor's unit), where no
// counter that follows the clock gets, but a forged or mistyped number
// lifts it (advance NAME 9007199254740990; heal.Write with a forged
// token). Such a counter hands out tokens toward 2^53-1, where every
// acquire fails. It prints the counter and the limit, and with --yes sets
// the counter to the server's clock, on every Redlock node that has it
// poisoned. It refuses while the lock is held (status 1): the holder's
// token came from the poisoned counter. The verifiers that accepted the
// poisoned tokens now refuse every new holder as stale: reset-highwater
// NAME RESOURCE each of their resources afterwards.
// Its user needs +@transaction (WATCH, MULTI, EXEC) beside fencelock's
// own ACL (docs/operating.md).
//
// # doctor
//
// doctor checks the Redis deployment for what makes locks vanish or tokens
// go back, and prints each finding with its severity (info, warn, danger),
// the servers it holds for, its consequence and its fix; --json prints
// {"worst", "findings", "errors"} instead. The checks (package
// lease/doctor): the server's name and version (Redis 6.2 or Valkey 7.2 at
// least), the eviction policy, persistence, replication without
// replica acknowledgement, the servers' clocks against this host's, PING
// round trips, a default user without a password, plaintext to a host
// that is not this one, poisoned counters (of --prefix; see
// repair-counter), and on a Redis Cluster sharded pub/sub and the slot of a
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
// lease, or make tokens go back. When a server could not be checked
// (unreachable, or no answer within 30s), or refused a check's command
// (NOPERM: stderr names the check and the permission the user lacks), and
// no finding is danger, it exits with status 5 of its own, and says so on stdout: NOT CHECKED when
// no server answered (with --json, "worst" is null), INCOMPLETE when some
// did ("complete" is false); stderr says why.
//
// # Time limits
//
// A slow, frozen or unreachable Redis does not keep fencelock much past the
// time it was given. inspect, advance, reset-highwater and repair-counter
// end within --timeout (default 5s) + 0.4s. run has two budgets, one on each side of
// the command:
//
//   - Before the command: taking the lock, claiming the period (--once-per,
//     at most --timeout of it) and, when either fails, the release and the
//     cleanups end within D + 0.4s, D being --wait or, without it,
//     --timeout. The command does not start without its claim.
//   - After the command exits: recording its period (--once-per) and the
//     release share 5s, and the cleanups end within 0.4s more.
//
// The 0.4s covers a quick check, after a wait that ended without the lock,
// that tells a held lock (status 3) from a Redis that does not answer
// (status 1), and the cleanups before exit (a release, a waiter leaving the
// fair queue), which are cut short when that time is up: the lock and
// ticket keys then expire on their own, after the lease's ttl. doctor ends
// within 30s.
//
// # Redis
//
// --redis URL (repeatable, or several URLs separated by commas) or else the
// REDIS_URL environment variable. With neither, the command is a usage
// error (status 2) before any connection: a lock tool that fell back to
// localhost would, run from cron (which does not pass on a shell's export),
// lock each host's own Redis and exclude nothing.
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
// URLs (an odd number, at least 3; two or four are a usage error) are
// independent masters for Redlock (package lease/redlock) with quorum
// fencing. Every client has go-redis's ContextTimeoutEnabled set, so the
// time limits above bound every read and write, and DialerRetries 1, so a
// Redis that refuses connections is reported as such at once; Redlock
// nodes also get MaxRetries -1 unless the URL sets max_retries.
//
// Bad input is a usage error (status 2) before any connection: a URL with
// an empty host (redis://:6379/0, or redis://${HOST}:6379/0 with HOST
// unset: go-redis would dial localhost), a connection count in a URL
// (pool_size, min_idle_conns, max_idle_conns, max_active_conns,
// max_concurrent_dials, pipeline_pool_size) outside 0 to 1000 (-1 for
// pipeline_pool_size), retries (max_retries, dialer_retries,
// max_redirects) outside -1 to 100, a lock name, resource or --prefix with
// a character that does not print (a control character such as a newline,
// a right-to-left override), a duration past its ceiling: --ttl, --grace and
// --timeout 1h, --wait 24h, --once-per 87600h (ten years,
// once.MaxPeriod), a --permits outside 1 to 64 (lease.MaxPermits). inspect quotes a holder id that is not printable, and
// shows a lock key without a ttl (not made by fencelock) as such.
//
// fencelock never prints a password: a URL in a message has the password
// of its user info and of its password parameters masked (xxxxx).
//
// --prefix sets the prefix of the lock's Redis keys and channel (default
// "fencelock:"). --timeout sets the time limit of inspect, advance and run
// without --wait (default 5s).
//
// # TLS
//
// A rediss:// URL (and rediss+cluster://, rediss+sentinel://) speaks TLS
// and checks the server's certificate against the system's roots; Go reads
// them from the file named by SSL_CERT_FILE (or the directories in
// SSL_CERT_DIR) when set, instead of the system's store. To trust a
// private CA without touching the environment of every process, and to
// present a client certificate to a server that requires one
// (tls-auth-clients yes, mutual TLS):
//
//	--tls-ca FILE     PEM CA certificate(s) (or FENCELOCK_TLS_CA)
//	--tls-cert FILE   PEM client certificate (or FENCELOCK_TLS_CERT)
//	--tls-key FILE    its PEM key (or FENCELOCK_TLS_KEY)
//
// A flag wins over its variable. They apply to every rediss URL of the
// command (reset-highwater's rediss --verifier too); with a redis:// URL
// they are a usage error, never a silent plaintext link. Do not use
// go-redis's ?skip_verify=true: it accepts any certificate, so whoever is
// on the path can pose as the server and read the password.
//
// # Exit status
//
//	0..255  run: the command's own exit status when it ran and the lease held
//	        (128+N when the command died of signal N)
//	0       inspect, advance, reset-highwater, help: success; doctor: every
//	        server checked and no danger finding
//	1       other errors: Redis unreachable, command not found, ...
//	2       usage error: bad flags or arguments (one line and a hint on stderr)
//	3       run: the lock is held by another holder, or every permit
//	        (--permits) is held (it was not free within --wait)
//	4       run: the lease was lost, or was being lost (its refreshes
//	        failed near its deadline), while the command ran; the command's
//	        process group was sent SIGTERM and SIGKILL as described under
//	        run, if it was still running (lost before the command started:
//	        it did not run)
//	4       doctor: a danger finding (a lock can vanish or tokens go back)
//	5       doctor: a server could not be checked, and no finding was danger
//	6       run --once-per: a run completed in this period already; the
//	        command did not run
//	128+N   run: fencelock got signal N while it waited for the lock
//
// A command's own status of 1 to 6 looks like fencelock's: fencelock's own
// failures are also reported on stderr, prefixed "fencelock: ".
package main
