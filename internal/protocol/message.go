package protocol

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Attempt names one try of a fair waiter. The try writes it into the
// waiter's [Ticket], and a release that hands the lock over names it in the
// [Message], so the waiter knows which of its tries the handoff followed
// and counts its lease from when it sent that one. Ids are random, so a
// message for one Acquire is never taken for another's, even under the
// same holder id.
type Attempt uint64

// NewAttempt returns a fresh attempt id (never 0).
func NewAttempt() Attempt { return Attempt(rand.Uint64()>>1 | 1) }

// String is the attempt's text form in tickets and messages.
func (a Attempt) String() string { return strconv.FormatUint(uint64(a), 10) }

// ParseAttempt reads an attempt's text form.
func ParseAttempt(s string) (Attempt, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("protocol: bad attempt %q", s)
	}
	return Attempt(n), nil
}

// Message is one release message on a lock's channel: a plain wake-up (an
// unfair release: "", one local waiter per client goes and looks), or a
// handoff ("holder:seq:attempt": the fair release gave the lock, with
// Seq, to Holder, whose try Attempt wrote the ticket it used). A
// semaphore's handoff names the slot it gave after them:
// "holder:seq:attempt:slot".
type Message struct {
	Handoff bool
	Holder  string
	Seq     uint64
	Attempt Attempt
	// Permit: a semaphore's handoff, of slot Slot.
	Permit bool
	Slot   int
}

// ErrMessage is returned for a payload that is no release message.
var ErrMessage = errors.New("protocol: bad release message")

// ParseMessage reads a release message's payload.
func ParseMessage(payload string) (Message, error) {
	if payload == "" {
		return Message{}, nil
	}
	parts := strings.Split(payload, ":")
	var m Message
	if len(parts) == 4 {
		slot, err := strconv.Atoi(parts[3])
		if err != nil || slot < 0 || slot >= MaxPermits || strconv.Itoa(slot) != parts[3] {
			return Message{}, fmt.Errorf("%w: %q: slot", ErrMessage, payload)
		}
		m.Permit, m.Slot, parts = true, slot, parts[:3]
	}
	if len(parts) != 3 || parts[0] == "" {
		return Message{}, fmt.Errorf("%w: %q", ErrMessage, payload)
	}
	seq, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != parts[1] {
		return Message{}, fmt.Errorf("%w: %q: seq", ErrMessage, payload)
	}
	a, err := ParseAttempt(parts[2])
	if err != nil {
		return Message{}, fmt.Errorf("%w: %q: %w", ErrMessage, payload, err)
	}
	m.Handoff, m.Holder, m.Seq, m.Attempt = true, parts[0], seq, a
	return m, nil
}

// String is the message's payload, as the release scripts write it.
func (m Message) String() string {
	if !m.Handoff {
		return ""
	}
	s := m.Holder + ":" + strconv.FormatUint(m.Seq, 10) + ":" + m.Attempt.String()
	if m.Permit {
		s += ":" + strconv.Itoa(m.Slot)
	}
	return s
}
