package model

// The state is a value of fixed-size arrays, so that a successor is a plain
// copy (no allocation per step), and every in-flight set is kept sorted, so
// that equal situations encode to equal bytes and an action's index means
// the same thing whenever the state is rebuilt (trace replay, walks).

const (
	maxQueue = maxClients * maxAcq
	maxReqs  = 16
	maxReps  = maxClients
	maxMsgs  = 12
	noHolder = -1
)

// phase is where a client is in its Acquire loop (lease/wait.go).
type phase uint8

const (
	idle       phase = iota // between Acquires (or done with all of them)
	trying                  // a try is in flight; c.try blocks on its reply
	waiting                 // queued: waiting for a wake-up or the timer
	refreshing              // a handoff's refresh is in flight
	holding                 // Acquire returned a lease, not yet released
	gone                    // exited without leaving (Old)
	dead                    // SIGKILL: stops for good
)

// server is one Redis: the lock key and its counter (a semaphore's N
// slots, each a lock key with its own counter), the fair queue with its
// tickets, a semaphore's permits key, and how many times it has restarted
// (its epoch).
type server struct {
	slot       [maxSlots]lockKey // the lock is slot 0
	permits    int8              // a semaphore's permits key: the N of the last try that changed it; 0 when missing
	nq         int8
	queue      [maxQueue]ticket
	queueExp   int16 // both queue keys expire together (enqueue's PEXPIRE)
	epoch      int8
	down       bool  // restarted in this tick: executes nothing until the next
	permitsExp int16 // the permits key's expiry, the counter ttl after its last write; 0: no ttl
}

// lockKey is a lock key and its counter: the lock's, or a semaphore
// slot's.
type lockKey struct {
	seq    int64
	ctr    int64
	exp    int16 // the lock's PX expiry, in ticks
	ctrExp int16 // 0: no ttl
	holder int8  // noHolder when the lock key is missing
	hasCtr bool
}

// ticket is a queue entry and its hash value "expiry:ttl" (the ttl is the
// config's, the same for every client, so it is left out); Fixed adds the
// attempt of the try that last renewed it.
type ticket struct {
	holder  int8
	exp     int16 // 0 once expired: the entry keeps its place until dropped
	attempt int8
}

type reqKind uint8

const (
	reqTry reqKind = iota
	reqRelease
	reqLeave
	reqRefresh
	reqConfirm // a claimed lease's refresh to its whole ttl (lifetime.StartClaim)
)

// request is a script call in flight to the server.
type request struct {
	kind    reqKind
	client  int8
	acq     int8
	holder  int8
	attempt int8
	slot    int8  // release, refresh, confirm: the semaphore's slot (0 for the lock)
	seq     int64 // refresh: the lock value's seq it must match (Fixed)
}

type repKind uint8

const (
	repAcquired repKind = iota
	repReacquired
	repHeld
	repQueued
	repRefreshed
	repRefreshFailed
	repConfirmed
	repConfirmFailed
)

// reply is a script's answer in flight back to its client.
type reply struct {
	client int8
	acq    int8
	kind   repKind
	epoch  int8
	slot   int8 // acquired, reacquired: the slot got (0 for the lock)
	pttl   int16
	seq    int64
}

// message is a fair handoff on the lock's channel, routed to the waiter
// that has the holder id (notify does that routing), or, with seq 0, a
// semaphore's plain wake-up (""), which every listening waiter gets: one
// message per waiter, under its holder id (see wake).
type message struct {
	holder  int8
	attempt int8 // Fixed: the ticket's attempt at the handoff; Old: 0
	epoch   int8
	slot    int8 // the semaphore's slot handed over (0 for the lock)
	seq     int64
}

// plain reports whether msg is a wake-up that hands nothing over.
func (msg *message) plain() bool { return msg.seq == 0 }

// client is one process running Acquire calls one after the other.
type client struct {
	phase    phase
	acq      int8               // Acquires started
	tries    int8               // tries sent in this Acquire
	attempts int8               // attempt ids used so far by this client: 1..attempts
	first    int8               // first attempt id of this Acquire
	timer    int16              // waiting: earliest tick the timer fires (0: already due)
	sent     [maxAttempts]int16 // send tick per attempt id (kept only while referenced)
	seq      int64              // holding or refreshing: the lease's token
	deadline int16              // holding: local deadline (0 once past); refreshing: refresh's send tick
	epoch    int8               // holding: server epoch of the lock under the lease
	claim    claim              // holding: whether the lease still stands on a handoff's claim
	confirm  int16              // claim == confirming: the send tick of the confirm
	n        int8               // the permits it asks for (a semaphore's N; 1 for the lock)
	slot     int8               // holding or refreshing: the slot of the lease
}

// claim is where a lease handed over for the claim window only stands.
type claim uint8

const (
	noClaim    claim = iota // the key has the lease's whole ttl
	claimed                 // handed for the claim only: the confirm is to send
	confirming              // the confirm is in flight
)

// granted is the highest token a client got as a live lease in an epoch.
type granted struct {
	seq    int64
	holder int8
}

// state is one global state: server, network, clients, spent budgets, and
// the ghost variables the properties need.
type state struct {
	now  int16
	srv  server
	nReq int8
	reqs [maxReqs]request
	nRep int8
	reps [maxReps]reply
	nMsg int8
	msgs [maxMsgs]message
	cl   [maxClients]client

	losses, dups, restarts, leaves, deaths, advances int8

	// Ghosts, per slot where they say so (the lock uses slot 0).
	issued  [maxSlots]int64              // highest seq the server ever issued, per slot
	got     [maxEpochs][maxSlots]granted // highest token gotten live, per epoch and slot
	quiet   int16                        // tick since which all clients are quiescent; -1 when not
	strand  [maxSlots]int16              // tick of the handoff that set the slot's key, until a try or refresh sets it again; -1 when not
	free    [maxSlots]int16              // semaphore: tick since which the slot waits for the live head (see untaken); -1 when not
	surplus uint8                        // semaphore that shrinks: bit i, slot i was let go of or free since the permits key went to or below i
}

func (s *state) addReq(r request) {
	if int(s.nReq) == maxReqs {
		panic("model: too many requests in flight; raise maxReqs")
	}
	s.reqs[s.nReq] = r
	s.nReq++
}

func (s *state) delReq(i int) {
	copy(s.reqs[i:s.nReq], s.reqs[i+1:s.nReq])
	s.nReq--
	s.reqs[s.nReq] = request{}
}

func (s *state) addRep(r reply) {
	if int(s.nRep) == maxReps {
		panic("model: too many replies in flight")
	}
	s.reps[s.nRep] = r
	s.nRep++
}

func (s *state) delRep(i int) {
	copy(s.reps[i:s.nRep], s.reps[i+1:s.nRep])
	s.nRep--
	s.reps[s.nRep] = reply{}
}

func (s *state) addMsg(m message) {
	if int(s.nMsg) == maxMsgs {
		panic("model: too many messages in flight; raise maxMsgs")
	}
	s.msgs[s.nMsg] = m
	s.nMsg++
}

func (s *state) delMsg(i int) {
	copy(s.msgs[i:s.nMsg], s.msgs[i+1:s.nMsg])
	s.nMsg--
	s.msgs[s.nMsg] = message{}
}

// clear deletes the lock key of slot i.
func (l *lockKey) clear() { l.holder, l.seq, l.exp = noHolder, 0, 0 }

func (s *server) enqueued(h int8) int {
	for i := 0; i < int(s.nq); i++ {
		if s.queue[i].holder == h {
			return i
		}
	}
	return -1
}

func (s *server) dequeue(i int) {
	copy(s.queue[i:s.nq], s.queue[i+1:s.nq])
	s.nq--
	s.queue[s.nq] = ticket{}
}
